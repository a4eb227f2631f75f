"""A self-signed certificate for 127.0.0.1, made with openssl, for tests that speak TLS."""

from __future__ import annotations

import subprocess
from pathlib import Path


def self_signed(where: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 (valid a day) and its key, written into `where`."""
    cert, key = where / "cert.pem", where / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key
