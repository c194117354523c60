"""deploy/Dockerfile and .dockerignore: a slim, non-root final stage that runs the daemon, built
from exactly what the build context lets in."""

from __future__ import annotations

import json
import re
from typing import Any

from tests.deploy_support import DEPLOY, ROOT, DockerfileParser


def _stages() -> list[list[dict[str, Any]]]:
    parser = DockerfileParser(str(DEPLOY / "Dockerfile"))
    stages: list[list[dict[str, Any]]] = []
    for ins in parser.structure:
        if ins["instruction"] == "FROM":
            stages.append([])
        if stages:
            stages[-1].append(ins)
    return stages


def _args(stage: list[dict[str, Any]], instruction: str) -> list[str]:
    return [i["value"] for i in stage if i["instruction"] == instruction]


def test_dockerfile_final_stage_is_slim_non_root_and_runs_the_daemon() -> None:
    parser = DockerfileParser(str(DEPLOY / "Dockerfile"))
    assert parser.is_multistage
    build, final = _stages()
    # both stages on the slim Python 3.11 image (the ARG default)
    assert all(re.fullmatch(r"python:3\.11-slim(-\w+)?", img) for img in parser.parent_images), (
        parser.parent_images
    )
    assert re.search(r"\bAS build\b", build[0]["value"])
    assert "pip wheel" in " ".join(_args(build, "RUN")) and "[test]" not in " ".join(_args(build, "RUN"))

    (user,) = _args(final, "USER")
    uid, _, gid = user.partition(":")
    assert uid.isdigit() and int(uid) != 0, f"USER {user}: must be a numeric non-root uid"
    assert not gid or (gid.isdigit() and int(gid) != 0), f"USER {user}: group must be numeric and non-root"
    assert [json.loads(v) for v in _args(final, "ENTRYPOINT")] == [["tftui", "--daemon"]]
    assert _args(final, "EXPOSE") == ["8080"]
    assert not _args(final, "HEALTHCHECK") and not _args(final, "CMD")
    run = " ".join(_args(final, "RUN"))
    assert not re.search(r"apt-get|apk |gcc|build-essential|\[test\]", run), run
    assert "--no-index" in run  # installs only the wheels the build stage made
    assert any("--from=build" in v for v in _args(final, "COPY"))
    # read-only root: no bytecode written at run time, HOME and the working directory in /tmp
    env_lines = " ".join(_args(final, "ENV"))
    assert "PYTHONDONTWRITEBYTECODE=1" in env_lines and "HOME=/tmp" in env_lines
    assert _args(final, "WORKDIR") == ["/tmp"]
    # USER comes after every RUN: nothing runs as root once the user is set, and nothing after it
    last_run = max(i["startline"] for i in final if i["instruction"] == "RUN")
    assert next(i["startline"] for i in final if i["instruction"] == "USER") > last_run


def test_dockerignore_lets_in_exactly_what_the_build_copies() -> None:
    lines = [ln for ln in (ROOT / ".dockerignore").read_text().splitlines() if ln and not ln.startswith("#")]
    assert lines[0] == "*"
    allowed = {ln[1:].rstrip("/") for ln in lines if ln.startswith("!")}
    build, _ = _stages()
    copied = {src.rstrip("/") for v in _args(build, "COPY") for src in v.split()[:-1]}
    assert copied == allowed
    for path in copied:
        assert (ROOT / path).exists(), path
