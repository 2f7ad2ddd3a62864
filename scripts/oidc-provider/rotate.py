"""Rotates the provider's signing key: the active key becomes inactive (still published, so tokens it signed
keep verifying) and a new RSA key signs from the provider's next start.  rotate.py STATE_DIR"""
import subprocess
import sys
from pathlib import Path

keys = Path(sys.argv[1]) / "keys"
number = len(list(keys.glob("inactive-*.pem")))
(keys / "active.pem").rename(keys / f"inactive-{number:03}.pem")
subprocess.run(
    ["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", str(keys / "active.pem")],
    check=True, capture_output=True,
)
