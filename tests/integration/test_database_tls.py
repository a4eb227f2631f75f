"""A database URL with `sslmode=verify-full` (as production mode requires) really connects over
TLS and really checks the server: the services' pool and the migrations, against a private
PostgreSQL cluster serving a certificate of a throwaway CA, on a free port."""

from __future__ import annotations

import asyncio
import os
import pwd
import shutil
import ssl
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import pytest

from services.adapters.postgres.database import create_pool
from services.adapters.postgres.migrate import head_revision, upgrade
from services.platform.settings import load_settings
from tests.conftest import asyncpg_dsn
from tools.infra import postgres
from tools.infra.paths import RunPaths, repo_root
from tools.infra.procs import free_ports

pytestmark = pytest.mark.integration
TLS_OF_THIS_SESSION = "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()"


@dataclass(frozen=True)
class TlsCluster:
    """A running cluster that serves TLS with a certificate for 127.0.0.1 only."""

    port: int
    ca: Path  # the CA that signed the server's certificate
    other_ca: Path  # a CA that did not

    def url(self, sslmode: str, ca: Path, host: str = "127.0.0.1") -> str:
        """The service URL of the cluster's database as production mode would accept it."""
        query = f"sslmode={sslmode}&sslrootcert={ca}"
        return f"postgresql+asyncpg://settle@{host}:{self.port}/settle?{query}"


def _openssl(*args: str | Path, cwd: Path) -> None:
    subprocess.run(["openssl", *map(str, args)], cwd=cwd, check=True, capture_output=True)


def _make_ca(directory: Path, name: str) -> None:
    _openssl(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "2",
        "-subj",
        f"/CN={name}",
        "-keyout",
        f"{name}.key",
        "-out",
        f"{name}.pem",
        cwd=directory,
    )


def _make_server_certificate(directory: Path) -> None:
    _openssl(
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=127.0.0.1",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        cwd=directory,
    )
    # The name a client checks under verify-full: the address only, so "localhost" differs.
    (directory / "san.ext").write_text("subjectAltName = IP:127.0.0.1\n")
    _openssl(
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "2",
        "-extfile",
        "san.ext",
        "-out",
        "server.pem",
        cwd=directory,
    )


def _install_for_server(tls: Path, data: Path) -> None:
    for name in ("server.pem", "server.key"):
        target = data / name
        shutil.copy(tls / name, target)
        target.chmod(0o600)  # the server refuses a key others can read
        if os.geteuid() == 0:
            record = pwd.getpwnam(postgres.SERVER_USER_WHEN_ROOT)
            os.chown(target, record.pw_uid, record.pw_gid)


async def _turn_tls_on(paths: RunPaths) -> None:
    conn = await asyncpg.connect(asyncpg_dsn(paths.database_url))
    try:
        await conn.execute("ALTER SYSTEM SET ssl_cert_file = 'server.pem'")
        await conn.execute("ALTER SYSTEM SET ssl_key_file = 'server.key'")
        await conn.execute("ALTER SYSTEM SET ssl = on")
        assert await conn.fetchval("SELECT pg_reload_conf()")
    finally:
        await conn.close()


@pytest.fixture(scope="module")
def cluster() -> Iterator[TlsCluster]:
    run = Path(tempfile.mkdtemp(prefix="settle-pg-tls-", dir="/tmp"))
    run.chmod(0o755)  # as root, the server's own user must reach the cluster under it
    tls = run / "tls"
    tls.mkdir()
    port = free_ports(1, set())
    paths = RunPaths(
        root=repo_root(),
        run=run,
        database_url=f"postgresql+asyncpg://settle@127.0.0.1:{port}/settle",
    )
    try:
        _make_ca(tls, "ca")
        _make_ca(tls, "other-ca")
        _make_server_certificate(tls)
        postgres.start(paths)
        _install_for_server(tls, paths.pg_data)
        asyncio.run(_turn_tls_on(paths))
        postgres.stop(paths)  # a restart, so TLS is on before the first test connects
        postgres.start(paths)
        yield TlsCluster(port, tls / "ca.pem", tls / "other-ca.pem")
    finally:
        try:
            postgres.stop(paths)
        finally:
            shutil.rmtree(paths.pg, ignore_errors=True)
            shutil.rmtree(run, ignore_errors=True)


async def _tls_of_pool(url: str) -> bool:
    pool = await create_pool(load_settings({"SETTLE_DATABASE_URL": url}), max_size=1)
    try:
        return bool(await pool.fetchval(TLS_OF_THIS_SESSION))
    finally:
        await pool.close()


@pytest.mark.timeout(300)
@pytest.mark.parametrize("sslmode", ["verify-full", "verify-ca"])
async def test_the_pool_connects_over_tls_to_the_server_its_ca_signed(
    cluster: TlsCluster, sslmode: str
) -> None:
    assert await _tls_of_pool(cluster.url(sslmode, cluster.ca)) is True


@pytest.mark.timeout(300)
@pytest.mark.parametrize("sslmode", ["verify-full", "verify-ca"])
async def test_a_server_another_ca_signed_is_refused(cluster: TlsCluster, sslmode: str) -> None:
    with pytest.raises(ssl.SSLCertVerificationError):
        await _tls_of_pool(cluster.url(sslmode, cluster.other_ca))


@pytest.mark.timeout(300)
async def test_verify_full_refuses_a_certificate_for_another_name(cluster: TlsCluster) -> None:
    with pytest.raises(ssl.SSLCertVerificationError):
        await _tls_of_pool(cluster.url("verify-full", cluster.ca, host="localhost"))
    # verify-ca checks the signature only: the same name passes, which is why verify-full is
    # the one to choose where the CA signs more than this server.
    assert await _tls_of_pool(cluster.url("verify-ca", cluster.ca, host="localhost")) is True


@pytest.mark.timeout(300)
async def test_migrations_run_over_verified_tls(cluster: TlsCluster) -> None:
    url = cluster.url("verify-full", cluster.ca)
    await asyncio.to_thread(upgrade, url)  # alembic runs its own event loop
    conn = await asyncpg.connect(asyncpg_dsn(url))
    try:
        assert await conn.fetchval("SELECT version_num FROM alembic_version") == head_revision()
    finally:
        await conn.close()
