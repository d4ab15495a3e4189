#!/usr/bin/env python3
"""The README's commands, run as a reader would type them.

Usage: readme_commands.py README.md SERVESIM_BIN

What runs, in a scratch folder that holds the results.db of `make demo` and links to the
repository's data folders (models, profiles, scenarios, traces, bench) and to the build folder
(`build`, the folder above SERVESIM_BIN's app/), with SERVESIM_BIN's folder first on PATH:

  * every ```sh block, in README order, as one bash script with `set -euo pipefail`: a command that
    fails fails the test. Lines that only a reader's machine can run are left out, each named in
    the output: `make ...` (the targets this test is run by) and `cmake ...` (they would configure
    the build this test runs in); the profiling harness's lines run where the harness was built
    (`build/profiles/harness/servesim-profile` exists), and those that measure only where a GPU
    answers (`nvidia-smi -L`); `--plan` needs none.
  * every `servesim <command>` of the ```text synopsis answers `--help`.
  * the ```json block of the CI goodput gate recipe is written as a baseline file and run by
    `servesim regress --json`: it must be read (exit 0 or 1, a verdict per entry), not refused as
    bad input (exit 2).
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

DATA_FOLDERS = ("models", "profiles", "scenarios", "traces", "bench")


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def fenced_blocks(text):
    """(language, body) of each fenced block, in order."""
    return re.findall(r"^```(\w*)\n(.*?)^```", text, re.S | re.M)


def commands(body):
    """The block's commands: lines joined while a double-quoted string is open."""
    out, current = [], ""
    for line in body.splitlines():
        current = current + "\n" + line if current else line
        if current.count('"') % 2 == 0:
            if current.strip():
                out.append(current)
            current = ""
    if current:
        out.append(current)
    return out


def gpu_answers():
    try:
        return subprocess.run(["nvidia-smi", "-L"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def left_out(command, harness_built, has_gpu):
    """Why `command` does not run here, or None when it runs."""
    word = command.split()[0]
    if word == "make":
        return "a make target: what this test is run by"
    if word == "cmake":
        return "configures a build: this test runs in one"
    if "servesim-profile" in word:
        if not harness_built:
            return "the profiling harness is not built here (no nvcc)"
        if "--plan" not in command and not has_gpu:
            return "measures on a GPU, and none answers here"
    return None


def scratch_folder(repo, build):
    scratch = tempfile.mkdtemp(prefix="servesim_readme_")
    for name in DATA_FOLDERS:
        os.symlink(os.path.join(repo, name), os.path.join(scratch, name))
    os.symlink(build, os.path.join(scratch, "build"))
    return scratch


def run_script(script, cwd, env):
    r = subprocess.run(["bash", "-c", "set -euo pipefail\n" + script], cwd=cwd, env=env,
                       capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        fail("README commands failed (exit %d):\n%s\nstdout:\n%s\nstderr:\n%s"
             % (r.returncode, script, r.stdout[-4000:], r.stderr[-4000:]))


def check_shell_blocks(blocks, cwd, env, build):
    harness_built = os.path.exists(os.path.join(build, "profiles/harness/servesim-profile"))
    has_gpu = gpu_answers()
    ran = 0
    for language, body in blocks:
        if language != "sh":
            continue
        script = []
        for command in commands(body):
            why = left_out(command, harness_built, has_gpu)
            if why:
                print("left out  %s  (%s)" % (command.splitlines()[0], why))
            else:
                script.append(command)
        if script:
            run_script("\n".join(script), cwd, env)
            ran += len(script)
            print("ran       " + "\n          ".join(c.splitlines()[0] for c in script))
    if ran < 8:
        fail("only %d README commands ran: the README's recipes are not in ```sh blocks" % ran)


def check_synopsis(blocks, servesim, env):
    names = set()
    for language, body in blocks:
        if language == "text":
            names.update(re.findall(r"^servesim (\w+)", body, re.M))
    if len(names) < 10:
        fail("the ```text synopsis names %d commands, expected every command" % len(names))
    for name in sorted(names):
        r = subprocess.run([servesim, name, "--help"], capture_output=True, text=True, env=env)
        if r.returncode != 0:
            fail("servesim %s --help exits %d: %s" % (name, r.returncode, r.stderr))
    print("synopsis  %d commands answer --help" % len(names))


def check_baseline_example(blocks, repo, servesim, env):
    baselines = [body for language, body in blocks if language == "json" and "entries" in body]
    if len(baselines) != 1:
        fail("expected one ```json baseline example, found %d" % len(baselines))
    folder = tempfile.mkdtemp(prefix="servesim_readme_baseline_")
    os.mkdir(os.path.join(folder, "bench"))
    shutil.copytree(os.path.join(repo, "scenarios"), os.path.join(folder, "scenarios"))
    path = os.path.join(folder, "bench", "baseline.json")
    with open(path, "w") as f:
        f.write(baselines[0])
    r = subprocess.run([servesim, "regress", path, "--json"], capture_output=True, text=True,
                       env=env)
    if r.returncode not in (0, 1):
        fail("servesim regress refuses the README's baseline example (exit %d): %s"
             % (r.returncode, r.stderr))
    verdicts = [e.get("verdict") for e in json.loads(r.stdout)["entries"]]
    if not verdicts or None in verdicts:
        fail("regress --json gave no verdict per entry: " + r.stdout)
    shutil.rmtree(folder)
    print("baseline  the README's example is read: %s" % ", ".join(verdicts))


def main():
    if len(sys.argv) != 3:
        fail(__doc__)
    readme, servesim = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    repo = os.path.dirname(readme)
    build = os.path.dirname(os.path.dirname(servesim))
    blocks = fenced_blocks(open(readme).read())
    env = dict(os.environ, PATH=os.path.dirname(servesim) + os.pathsep + os.environ["PATH"],
               SERVESIM_DATA=repo)
    scratch = scratch_folder(repo, build)
    try:
        subprocess.run([servesim, "run", "--db", "results.db"], cwd=scratch, env=env, check=True,
                       capture_output=True)
        check_shell_blocks(blocks, scratch, env, build)
        check_synopsis(blocks, servesim, env)
        check_baseline_example(blocks, repo, servesim, env)
    finally:
        shutil.rmtree(scratch)
    print("ok")


if __name__ == "__main__":
    main()
