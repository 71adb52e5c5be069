//! The `persona-prefs` binary: parses the command line and configuration, installs tracing and
//! the metrics recorder, and calls into the library.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};
use persona_prefs::app;
use persona_prefs::config::{Config, LogFormat};
use tokio::sync::watch;

mod cli;

#[derive(Parser)]
#[command(
    name = "persona-prefs",
    version,
    about = "Durable memory of an LLM persona's own opinions, preferences and ideals."
)]
#[command(
    after_help = "Configuration: config/default.toml is built in; --config FILE overlays it; \
PERSONA_PREFS__<SECTION>__<KEY> environment variables override both (REDIS_URL, NATS_URL and \
PERSONA_PREFS_MODEL_DIR are short forms)."
)]
struct Cli {
    /// A TOML file overlaying the built-in defaults.
    #[arg(long, global = true, env = "PERSONA_PREFS_CONFIG")]
    config: Option<PathBuf>,
    /// How long a client command waits for the service's reply, in seconds
    /// (`nats.request_timeout_ms`; 30 by default).
    #[arg(long, global = true, value_name = "SECONDS")]
    timeout: Option<u64>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the worker: JetStream ingest, request-reply services and the metrics listener.
    #[command(
        after_help = "Example:\n  REDIS_URL=redis://127.0.0.1:6379 NATS_URL=nats://127.0.0.1:4222 persona-prefs serve"
    )]
    Serve,
    /// The persona's memory as MCP tools for an agent (manage, inspect, inject, check; its
    /// active beliefs as a resource), through the running service. stdio for an MCP host that
    /// starts this process; streamable HTTP (`/mcp`) with a bearer token per persona.
    #[command(
        after_help = "Examples:\n  persona-prefs mcp --persona stargazer\n  PERSONA_PREFS_MCP_TOKEN_STARGAZER=... persona-prefs mcp --transport http"
    )]
    Mcp {
        /// stdio or http.
        #[arg(long, default_value = "stdio")]
        transport: String,
        /// stdio: the persona served (`mcp.persona`).
        #[arg(long)]
        persona: Option<String>,
        /// http: where to listen (`mcp.listen`).
        #[arg(long)]
        listen: Option<String>,
    },
    /// Publish a sample conversation, process it with the real worker and print what the
    /// persona now believes.
    #[command(
        after_help = "Example:\n  persona-prefs demo --sample examples/sample_conversation.jsonl"
    )]
    Demo {
        #[arg(long, default_value = "examples/sample_conversation.jsonl")]
        sample: PathBuf,
    },
    /// The persona inspector: a web page showing what each persona believes, how it changed
    /// its mind and why, over the running service. Loopback only by default.
    #[command(
        after_help = "Examples:\n  persona-prefs ui                      # read-only, http://127.0.0.1:8088\n  persona-prefs ui --allow-writes       # curation too (the NATS user needs the write role)"
    )]
    Ui {
        /// Address to listen on (`ui.listen`).
        #[arg(long)]
        listen: Option<String>,
        /// Show and accept curation (`ui.allow_writes`).
        #[arg(long)]
        allow_writes: bool,
    },
    #[command(flatten)]
    Client(cli::ClientCommand),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let config = match Config::load(cli.config.as_deref()) {
        Ok(mut config) => {
            if let Some(seconds) = cli.timeout {
                config.nats.request_timeout_ms = seconds.saturating_mul(1000).max(1);
            }
            config
        }
        Err(error) => {
            eprintln!("persona-prefs: {error}");
            return ExitCode::from(2);
        }
    };
    install_tracing(matches!(cli.command, Command::Serve), config.log.format);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("persona-prefs: starting the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli.command, config)) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("persona-prefs: {error:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(command: Command, config: Config) -> anyhow::Result<ExitCode> {
    match command {
        Command::Serve => {
            let metrics = install_metrics()?;
            let spans = persona_prefs::otlp::install(&config.telemetry.otlp)?;
            let shutdown = shutdown_on_signal();
            let served = app::serve(config, Some(metrics), shutdown).await;
            if let Some(spans) = spans {
                spans.shutdown().await;
            }
            served?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Demo { sample } => {
            let metrics = install_metrics()?;
            let ui_listen = config.ui.listen.clone();
            let report = app::demo(config, &sample, Some(metrics)).await?;
            cli::print_demo(&report);
            // Point at the inspector: the running one, or how to start it.
            let page = format!("http://{ui_listen}/personas/{}", report.persona_id);
            let inspector_running = reqwest::Client::new()
                .get(format!("http://{ui_listen}/healthz"))
                .timeout(std::time::Duration::from_millis(500))
                .send()
                .await
                .is_ok_and(|response| response.status().is_success());
            if inspector_running {
                println!("\nLook at it in the inspector: {page}");
            } else {
                println!("\nTo look at it in a browser: `persona-prefs ui`, then open {page}");
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Ui {
            listen,
            allow_writes,
        } => {
            let listen = listen.unwrap_or_else(|| config.ui.listen.clone());
            let writable = allow_writes || config.ui.allow_writes;
            eprintln!(
                "persona inspector on http://{listen} ({})",
                if writable {
                    "curation allowed"
                } else {
                    "read-only"
                }
            );
            let mut stop = shutdown_on_signal();
            let shutdown = async move {
                let _ = stop.wait_for(|stopped| *stopped).await;
            };
            persona_prefs::ui::serve(&config, &listen, writable, shutdown).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Mcp {
            transport,
            persona,
            listen,
        } => {
            match transport.as_str() {
                "stdio" => {
                    let persona = persona.unwrap_or_else(|| config.mcp.persona.clone());
                    persona_prefs::mcp::serve_stdio(&config, &persona).await?;
                }
                "http" => {
                    let listen = listen.unwrap_or_else(|| config.mcp.listen.clone());
                    eprintln!("MCP server on http://{listen}/mcp");
                    let mut stop = shutdown_on_signal();
                    let shutdown = async move {
                        let _ = stop.wait_for(|stopped| *stopped).await;
                    };
                    persona_prefs::mcp::serve_http(&config, &listen, shutdown).await?;
                }
                other => anyhow::bail!("--transport {other:?}: stdio or http"),
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Client(command) => cli::run(command, config).await,
    }
}

fn install_tracing(verbose: bool, format: LogFormat) {
    use std::io::IsTerminal;
    let default = if verbose { "info" } else { "warn" };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Json => logs.json().init(),
        // Colour codes are noise in a file or a log collector.
        LogFormat::Text => logs.with_ansi(std::io::stderr().is_terminal()).init(),
    }
}

fn install_metrics() -> anyhow::Result<metrics_exporter_prometheus::PrometheusHandle> {
    persona_prefs::telemetry::install_recorder(&persona_prefs::serve::Endpoint::names())
        .context("installing the Prometheus recorder")
}

/// A flag that turns true on SIGTERM or SIGINT. A second signal exits at once.
fn shutdown_on_signal() -> watch::Receiver<bool> {
    let (sender, receiver) = watch::channel(false);
    tokio::spawn(async move {
        wait_for_signal().await;
        tracing::info!("signal received; shutting down (send again to exit at once)");
        let _ = sender.send(true);
        wait_for_signal().await;
        std::process::exit(130);
    });
    receiver
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut terminate = signal(SignalKind::terminate()).expect("installing SIGTERM handler");
        tokio::select! {
            _ = terminate.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
