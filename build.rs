//! Names the build in `persona_prefs_build_info`: the git commit it was built from, or
//! "unknown" outside a git checkout (a source tarball, a container build without `.git`).

fn main() {
    let sha = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|output| output.status.success())
        .and_then(|output| String::from_utf8(output.stdout).ok())
        .map(|sha| sha.trim().to_string())
        .filter(|sha| !sha.is_empty())
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=PERSONA_PREFS_GIT_SHA={sha}");
    // A new commit changes HEAD (or the branch it points to).
    println!("cargo:rerun-if-changed=.git/HEAD");
    println!("cargo:rerun-if-changed=.git/refs/heads");
}
