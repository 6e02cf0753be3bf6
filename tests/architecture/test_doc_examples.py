"""Every example command in README.md and docs/ runs as written, with the output shown.

An example is a ``console`` block: lines starting with ``$ `` are commands (a
trailing backslash continues one), the lines after a command are its output.
In the shown output, ``...`` stands for any text (also several lines), and
loopback addresses match whatever port the run got. A command whose shown
output holds ``error:`` must exit non-zero; every other command must exit 0.

Commands run in a scratch folder holding ``examples/`` (the repository's), so
they create nothing in the checkout. ``nnhal serve`` runs in the background
until the document ends; the address it printed in the document stands for
the one it got. ``127.0.0.1:50513`` (the default address) is a server of the
default device started for the document. ``../shared/nnapi-vectors`` is the
shared corpus (the examples that need it skip without it).

No command may hide outside a ``console`` block: a ``$ `` line anywhere else
fails the test.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from repo_paths import REPO_ROOT

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

DOCS = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]
BIN = Path(sys.executable).parent
VECTORS = Path(os.environ.get("NNHAL_VECTORS", REPO_ROOT.parent / "shared" / "nnapi-vectors"))
DEFAULT_ADDRESS = "127.0.0.1:50513"
ADDRESS = re.compile(r"127\.0\.0\.1:\d+")
#: a gRPC C-core log line ("I1125 02:06:42.347982 6839 chttp2_transport.cc:1403] ..."): not
#: the command's output (it leaks now and then at channel shutdown; a known rough edge)
CORE_LOG = re.compile(r"^[IWE]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ \S+:\d+\] .*$\n?", re.MULTILINE)


@dataclass
class Example:
    line: int
    command: str
    output: list[str] = field(default_factory=list)


def examples(path: Path) -> list[Example]:
    found: list[Example] = []
    fence = None
    lines = path.read_text(encoding="utf-8").split("\n")
    k = 0
    while k < len(lines):
        text = lines[k]
        if text.startswith("```"):
            fence = None if fence is not None else (text[3:].strip() or "text")
        elif fence == "console" and text.startswith("$ "):
            command, start = text[2:], k + 1
            while command.endswith("\\"):
                k += 1
                command = command[:-1] + " " + lines[k].strip()
            found.append(Example(start, command))
        elif fence == "console" and found:
            found[-1].output.append(text)
        k += 1
    return found


def hidden_commands(path: Path) -> list[str]:
    bad, fence = [], None
    for number, text in enumerate(path.read_text(encoding="utf-8").split("\n"), 1):
        if text.startswith("```"):
            fence = None if fence is not None else (text[3:].strip() or "text")
        elif text.startswith("$ ") and fence != "console":
            bad.append(f"{path.name}:{number}: {text}")
    return bad


def _matches(shown: list[str], actual: str) -> bool:
    def norm(text: str) -> str:
        return "\n".join(ADDRESS.sub("127.0.0.1:PORT", t.rstrip()) for t in text.split("\n"))

    pattern = re.escape(norm("\n".join(shown)).strip()).replace(r"\.\.\.", ".*?")
    actual = CORE_LOG.sub("", actual)
    return re.fullmatch(pattern, norm(actual).strip(), re.DOTALL) is not None


class Session:
    """One document's scratch folder, servers and address substitutions."""

    def __init__(self, tmp: Path) -> None:
        self.cwd = tmp
        (tmp / "examples").symlink_to(REPO_ROOT / "examples")
        self.env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
        self.servers: list[subprocess.Popen] = []
        self.readers: list[threading.Thread] = []
        self.addresses: dict[str, str] = {}

    def serve(self, argv: list[str]) -> str:
        if "--address" in argv:
            argv[argv.index("--address") + 1] = "127.0.0.1:0"
        else:
            argv += ["--address", "127.0.0.1:0"]
        proc = subprocess.Popen(
            argv, cwd=self.cwd, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True,
        )  # fmt: skip
        self.servers.append(proc)
        printed = ""
        while proc.stdout is not None and len(printed) < 10_000:  # up to the address line
            line = proc.stdout.readline()
            printed += line
            if not line or ("serving" in line and ADDRESS.search(line)):
                break
        assert ADDRESS.search(printed), f"{shlex.join(argv)} printed {printed!r}"
        # keep reading: a server whose log fills an unread pipe blocks the next commands
        reader = threading.Thread(target=proc.stdout.read, daemon=True)
        reader.start()
        self.readers.append(reader)
        return printed

    def substitute(self, command: str) -> str:
        if DEFAULT_ADDRESS in command and DEFAULT_ADDRESS not in self.addresses:
            printed = self.serve(["nnhal", "serve"])
            self.addresses[DEFAULT_ADDRESS] = ADDRESS.search(printed).group(0)
        for shown, real in self.addresses.items():
            command = command.replace(shown, real)
        return command.replace("../shared/nnapi-vectors", str(VECTORS))

    def run(self, example: Example) -> tuple[int, str]:
        command = self.substitute(example.command)
        argv = shlex.split(command, comments=True)
        if argv[:2] == ["nnhal", "serve"]:
            printed = self.serve(argv)
            shown = next((ADDRESS.search(s) for s in example.output if ADDRESS.search(s)), None)
            if shown is not None:
                self.addresses[shown.group(0)] = ADDRESS.search(printed).group(0)
            return 0, printed
        done = subprocess.run(
            command, check=False, shell=True, cwd=self.cwd, env=self.env, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, timeout=600,
        )  # fmt: skip
        return done.returncode, done.stdout

    def close(self) -> None:
        for proc in self.servers:
            proc.send_signal(signal.SIGTERM)
        for proc in self.servers:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for reader in self.readers:  # the output ends with the process
            reader.join(timeout=60)
        for proc in self.servers:
            proc.stdout.close()


def test_no_command_outside_console_blocks():
    bad = [b for doc in DOCS for b in hidden_commands(doc)]
    assert not bad, "commands must be in ```console blocks:\n" + "\n".join(bad)


def test_the_parser_reads_commands_and_output(tmp_path):
    doc = tmp_path / "x.md"
    doc.write_text("```console\n$ nnhal a \\\n  --b\nout 1\n...\n$ nnhal c\n```\n$ nope\n")
    (first, second) = examples(doc)
    assert (first.command, first.output, second.command) == ("nnhal a  --b", ["out 1", "..."],
                                                             "nnhal c")  # fmt: skip
    assert hidden_commands(doc) == ["x.md:8: $ nope"]
    assert _matches(["a ...", "..."], "a b c\nmore\nlines")
    assert not _matches(["a", "b"], "a\nc")
    core = "I1125 02:06:42.347982    6839 chttp2_transport.cc:1403] Got goaway\n"
    assert _matches(["{", "}"], core + "{\n}\n")


@pytest.mark.parametrize("doc", [d for d in DOCS if examples(d)], ids=lambda d: d.name)
def test_examples_run_as_written(doc, tmp_path):
    session = Session(tmp_path)
    try:
        for example in examples(doc):
            if "../shared/nnapi-vectors" in example.command and not VECTORS.is_dir():
                pytest.skip(f"the shared vectors are not at {VECTORS}")
            code, output = session.run(example)
            where = f"{doc.name}:{example.line}: $ {example.command}"
            wants_error = any("error:" in line for line in example.output)
            assert (code != 0) == wants_error, f"{where}\nexit {code}\n{output}"
            assert _matches(example.output, output), f"{where}\nprinted:\n{output}"
    finally:
        session.close()
