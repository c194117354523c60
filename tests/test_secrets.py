"""Secrets stay secret: failing runs of report, doctor, plan, the console and the daemon, with bad
DSNs (a `%` that is not an escape, an unclosed `[`, a broken conninfo, a wrong password, a refused
port) and kubeconfigs holding a token, a basic-auth password and a password in the server URL; every
byte of stdout and stderr (the daemon's JSON logs included) is searched for each credential.

Plus the redaction helper itself (`tftui.model.redact`) on the forms a credential comes in.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, unquote

import pytest
import yaml

from tests.daemon_support import _free_port
from tests.kubeapi import KubeApiServer
from tests.pg import PgServer, database
from tftui.model import redact

ROOT = Path(__file__).resolve().parent.parent

PW_PERCENT = "Pw%zz-percent-9"  # not a valid %-escape: the driver quotes the token
PW_BRACKET = "Pw-bracket-8xQ"
PW_CONNINFO = "Pw-conninfo-7xQ"
PW_PORT = "Pw-port-6xQ"
PW_REFUSED = "Pw-refused@5xQ"  # a raw "@" inside
PW_WRONG = "Pw-wrong-4xQ"
PW_ENV = "Pw-env%zz-3xQ"
TOKEN = "tok-Secret-kubeconfig-2xQ"
KUBE_PW = "kube-basic-Pw-1xQ"
URL_PW = "url-userinfo-Pw-0xQ"
SECRETS = (PW_PERCENT, PW_BRACKET, PW_CONNINFO, PW_PORT, PW_REFUSED, PW_WRONG, PW_ENV, TOKEN, KUBE_PW, URL_PW)


def kubeconfig(path: Path, server: str, *, userinfo: bool = True) -> Path:
    """A kubeconfig with a token, a basic-auth password and (optionally) a password in the URL."""
    if userinfo:
        scheme, _, rest = server.partition("://")
        server = f"{scheme}://admin:{URL_PW}@{rest}"
    cfg = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"token": TOKEN, "username": "admin", "password": KUBE_PW}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "c",
    }
    path.write_text(yaml.safe_dump(cfg))
    return path


@dataclass
class Run:
    name: str
    args: Sequence[str]
    expect: str  # a piece of the output that shows the run failed the intended way
    env: dict[str, str] | None = None
    daemon: bool = False  # a daemon that runs: SIGTERM once `expect` was logged
    code: int | None = 2


def _run(run: Run) -> tuple[Run, int, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("TFTUI_METRICS_DSN", "KUBERNETES_SERVICE_HOST")}
    env.update({"PYTHONPATH": str(ROOT), **(run.env or {})})
    proc = subprocess.Popen(
        [sys.executable, "-m", "tftui", *run.args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        if not run.daemon:
            out, err = proc.communicate(timeout=90)
            return run, proc.returncode, out + err
        assert proc.stdout is not None
        watchdog = threading.Timer(120, proc.kill)  # never hang the suite on a daemon that is silent
        watchdog.start()
        lines: list[str] = []
        for line in proc.stdout:  # the daemon runs until its logs show the failure, then SIGTERM
            lines.append(line)
            if run.expect in line:
                break
        proc.send_signal(signal.SIGTERM)
        try:
            out, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            raise AssertionError(
                f"{run.name}: no stop within 30 s of SIGTERM:\n{''.join(lines)}{out}{err}"[-4000:]
            ) from None
        watchdog.cancel()
        return run, proc.returncode, "".join(lines) + out + err
    finally:
        if proc.poll() is None:
            proc.kill()


def test_no_failing_run_prints_a_credential(pg_server: PgServer, tmp_path: Path) -> None:
    with database(pg_server, "secrets_db", "ts"):
        pass
    down = KubeApiServer().start()
    down_url = down.url
    down.stop()  # a server address nobody answers on
    unreachable = kubeconfig(tmp_path / "unreachable.yaml", down_url)
    live = KubeApiServer(bookmark_interval=0.2).start()
    try:
        reachable = kubeconfig(tmp_path / "live.yaml", live.url, userinfo=False)
        # also a per-server-URL password on the live server (urllib3 ignores the userinfo)
        reachable_url = kubeconfig(tmp_path / "live-url.yaml", live.url)
        bad_dsns = {
            "percent": f"postgresql://tftui:{PW_PERCENT}@127.0.0.1:{pg_server.port}/secrets_db",
            "bracket": f"postgresql://tftui:{PW_BRACKET}@[127.0.0.1/secrets_db",
            "conninfo": f"host=127.0.0.1 password={PW_CONNINFO} dbname",
            "port": f"postgresql://tftui:{PW_PORT}@127.0.0.1:notaport/secrets_db",
        }
        raw_at = f"postgresql://tftui:{PW_REFUSED}@127.0.0.1:1/public?connect_timeout=2"
        refused = f"postgresql://tftui:{quote(PW_REFUSED, safe='')}@127.0.0.1:1/public?connect_timeout=2"
        wrong = pg_server.dsn("secrets_db", password=PW_WRONG)
        runs = [
            *(
                Run(f"report {k}", ["report", "--demo", "--metrics-dsn", d], "metrics")
                for k, d in bad_dsns.items()
            ),
            Run("report wrong password", ["report", "--demo", "--metrics-dsn", wrong], "password authentication"),
            Run("report raw @", ["report", "--demo", "--metrics-dsn", raw_at], "host contains '@'"),
            Run("report refused", ["report", "--demo", "--metrics-dsn", refused], "cannot connect"),
            Run(
                "report env DSN",
                ["report", "--kubeconfig", str(reachable)],
                "invalid metrics DSN",
                env={"TFTUI_METRICS_DSN": f"postgresql://tftui:{PW_ENV}@127.0.0.1/db"},
            ),
            *(
                Run(f"doctor {k}", ["doctor", "--kubeconfig", str(unreachable), "--metrics-dsn", d],
                    "cannot reach the API server", code=1)
                for k, d in bad_dsns.items() if k in ("percent", "conninfo")
            ),
            Run("doctor live", ["doctor", "--kubeconfig", str(reachable_url), "--metrics-dsn", wrong],
                "password authentication", code=1),
            Run("plan", ["plan", "--kubeconfig", str(unreachable)], "no Kubernetes cluster reachable"),
            Run("console", ["--kubeconfig", str(unreachable), "--read-only"], "no Kubernetes cluster reachable"),
            Run("daemon unreachable", ["--daemon", "--kubeconfig", str(unreachable), "--listen", "127.0.0.1:0"],
                "cannot list"),
            Run("daemon bad DSN", ["--daemon", "--kubeconfig", str(reachable), "--lease-namespace", "tf-sys",
                                   "--listen", "127.0.0.1:0", "--metrics-dsn", bad_dsns["percent"]],
                "invalid metrics DSN"),
            Run(
                "daemon running",
                ["--daemon", "--kubeconfig", str(reachable_url), "--lease-namespace", "tf-sys",
                 "--listen", f"127.0.0.1:{_free_port()}", "--metrics-dsn", refused, "--log-level", "debug",
                 "--lease-duration", "2s", "--renew-deadline", "1500ms", "--retry-period", "200ms"],
                "metrics store unreachable",
                daemon=True,
                code=0,
            ),
        ]  # fmt: skip
        with ThreadPoolExecutor(max_workers=3) as pool:
            results = list(pool.map(_run, runs))
    finally:
        live.stop()
    for run, code, output in results:
        assert run.expect in output, (run.name, output[-2000:])
        assert run.code is None or code == run.code, (run.name, code, output[-2000:])
        for secret in SECRETS:
            for form in {secret, unquote(secret), *secret.split("@")}:  # nor a half of a raw "@"
                assert form not in output, f"{run.name}: {form!r} printed:\n{output}"


# -- the helper ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("dsn", "shown"),
    [
        ("postgresql://u:p%zzS3cr@h:4003/public", "postgresql://u:***@h:4003/public"),
        ("postgresql://u:S3cr@[h/db", "postgresql://u:***@[h/db"),
        ("postgresql://u:p@ss/w@h/db?sslmode=require", "postgresql://u:***@h/db?sslmode=require"),
        ("postgres://h/db?user=u&password=S3cr", "postgres://h/db?user=u&password=***"),
        ("host=h password=S3cr dbname=x", "host=h password=*** dbname=x"),
        ("host=h password='S3 cr' dbname=x", "host=h password=*** dbname=x"),
        ("host=h PASSWORD = S3cr", "host=h PASSWORD = ***"),
        ("postgresql://u@h/db", "postgresql://u@h/db"),
    ],
)
def test_redact_dsn(dsn: str, shown: str) -> None:
    assert redact.redact_dsn(dsn) == shown


def test_registered_secrets_are_masked_anywhere_even_percent_decoded() -> None:
    redact.register("Reg-S3cret%40x")
    text = "the server said: bad token Reg-S3cret@x (was Reg-S3cret%40x)"
    assert redact.scrub(text) == "the server said: bad token *** (was ***)"
    redact.register("ab")  # too short to mask in free text ...
    assert redact.scrub("a tab and a cab") == "a tab and a cab"
    assert redact.scrub("password=ab here", "ab") == "password=*** here"  # ... but as a credential
    assert redact.scrub("Authorization: Bearer eyJhbGciOi.x-y") == "Authorization: Bearer ***"
