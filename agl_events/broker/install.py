"""What the local broker needs before it can start: Java 17+, Kafka's jars (fetched with Maven), and the
excerpts of Kafka's output that explain a failure.

Kept apart from `broker.local` (the broker's lifecycle) so that the lifecycle reads without the installation
details, and the checks of an installation (`find_java`, `fetch_jars`) are usable on their own.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import deque
from pathlib import Path

from agl_events.config import data_dir

#: Where the Maven project, the configuration template and the log4j configuration live: deploy/kafka/
#: in a checkout, agl_events/_kafka in an installed package.
DEPLOY_DIR = data_dir("_kafka", "deploy/kafka")
POM_FILE = DEPLOY_DIR / "pom.xml"
TEMPLATE_FILE = DEPLOY_DIR / "server.properties.template"
LOG4J_CONFIG_FILE = DEPLOY_DIR / "log4j2.yaml"
#: Main classes inside kafka_2.13-*.jar (verified against Kafka 4.3.1).
KAFKA_MAIN_CLASS = "kafka.Kafka"
STORAGE_TOOL_CLASS = "kafka.tools.StorageTool"
#: Kafka 4.x brokers require Java 17.
MIN_JAVA_VERSION = 17
#: How many log lines an error message about a failed start quotes.
FAILURE_LOG_LINES = 20

INSTALL_HINT = (
    "Install Java 17 or newer and Maven (e.g. `apt install openjdk-17-jre-headless maven` or "
    "`brew install openjdk@17 maven`), or point AGL_KAFKA_BOOTSTRAP at an existing Kafka cluster."
)


class BrokerError(RuntimeError):
    """The local broker cannot be fetched, started or stopped; the message says what to do."""


def fetch_jars(libs_dir: Path) -> Path:
    """Download Kafka's jars with Maven into `libs_dir` unless they are there; returns it.

    Maven rather than a tarball download because it verifies checksums, caches in ~/.m2 (a second
    home copies from there without downloading) and pins every version in one reviewed file
    (deploy/kafka/pom.xml). Maven fills a staging folder that is renamed at the end, so an interrupted
    download never leaves a class path that has Kafka's jar but lacks others.
    """
    if has_kafka_jar(libs_dir):
        return libs_dir
    find_java()
    mvn = shutil.which("mvn")
    if mvn is None:
        raise BrokerError(
            f"Kafka's jars are not in {libs_dir}, and Maven (`mvn`) is needed once to download them. "
            f"{INSTALL_HINT}"
        )
    print(f"Fetching Apache Kafka's jars with Maven into {libs_dir} (once; about a minute when ~/.m2 "
          "does not have them yet)...", file=sys.stderr, flush=True)
    libs_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".libs-", dir=libs_dir.parent))
    try:
        command = [mvn, "-q", "-B", "-f", str(POM_FILE), f"-Dagl.kafka.libs={staging}",
                   "dependency:copy-dependencies"]
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0 or not has_kafka_jar(staging):
            output = last_lines((result.stdout + result.stderr).splitlines(), FAILURE_LOG_LINES)
            raise BrokerError(
                f"downloading Kafka with Maven failed (exit code {result.returncode}): "
                f"{' '.join(command)}\n{output}"
            )
        shutil.rmtree(libs_dir, ignore_errors=True)  # jars of an interrupted `make`, say
        staging.rename(libs_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return libs_dir


def find_java() -> str:
    """The `java` executable (JAVA_HOME first), checked to be at least Java 17."""
    java_home = os.environ.get("JAVA_HOME")
    candidate = Path(java_home) / "bin" / "java" if java_home else None
    java = str(candidate) if candidate and candidate.exists() else shutil.which("java")
    if java is None:
        raise BrokerError(f"Java (`java`) is needed to run the local Kafka broker. {INSTALL_HINT}")
    version = _java_major_version(java)
    if version is not None and version < MIN_JAVA_VERSION:
        raise BrokerError(f"{java} is Java {version}; Kafka needs Java {MIN_JAVA_VERSION}+. {INSTALL_HINT}")
    return java


def has_kafka_jar(libs_dir: Path) -> bool:
    return any(libs_dir.glob("kafka_2.13-*.jar"))


def _java_major_version(java: str) -> int | None:
    """Parse `java -version` ("1.8.0_392" is 8, "17.0.15" is 17); None when unrecognisable."""
    result = subprocess.run([java, "-version"], capture_output=True, text=True, check=False)
    match = re.search(r'version "(\d+)(?:\.(\d+))?', result.stderr + result.stdout)
    if match is None:
        return None
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


def error_lines(lines: list[str], limit: int) -> list[str]:
    """ERROR/FATAL records with their exception messages ("Caused by: ..."), minus stack frames."""
    picked: list[str] = []
    in_error = False
    for line in lines:
        if line.startswith("["):
            in_error = "] ERROR " in line or "] FATAL " in line
            if in_error:
                picked.append(line)
        elif in_error and line.strip() and not line.lstrip().startswith(("at ", "...")):
            picked.append(line)
    return picked[:limit]


def last_lines(lines: list[str], n: int) -> str:
    """The last `n` of `lines`, as one text."""
    return "\n".join(deque(lines, maxlen=n))
