"""Each of Python's private APIs (argparse, atexit) in beam_embed/process/private_apis/stdlib.py
still there, with the signature and the behaviour relied on: an upgrade that changes one fails
here, by name."""

from __future__ import annotations

import argparse
import atexit
import inspect

from beam_embed.process.private_apis import stdlib as apis


def _params(fn) -> list[str]:
    return list(inspect.signature(fn).parameters)


def test_argparse_formatter_hooks_are_the_ones_help_calls():
    for hook in ("_format_action_invocation", "_get_help_string"):
        assert _params(getattr(argparse.HelpFormatter, hook)) == ["self", "action"], hook

    class Shown(apis.HelpFormatterHooks):
        def shown_option_strings(self, action):
            return [s for s in action.option_strings if "_" not in s]

        def help_text(self, action):
            return "help: " + (action.help or "")

    parser = argparse.ArgumentParser(prog="p", formatter_class=Shown, add_help=False)
    parser.add_argument("--a-b", "--a_b", help="x")
    text = parser.format_help()
    assert "--a-b A_B" in text and "--a_b" not in text and "help: x" in text


def test_an_option_string_added_after_add_argument_parses():
    parser = argparse.ArgumentParser(add_help=False)
    action = parser.add_argument("--a_b", type=int)
    assert apis.add_option_string(parser, action, "--a-b")
    assert not apis.add_option_string(parser, action, "--a-b")  # taken
    assert parser.parse_args(["--a-b", "3"]).a_b == 3
    assert apis.option_strings(parser) == {"--a_b", "--a-b"}


def test_atexit_handlers_run_now_and_once():
    # In a child process: running this process's handlers would run TensorFlow's and Keras's
    # clean-ups too, and break the tests that use them afterwards.
    import subprocess
    import sys

    assert callable(getattr(atexit, "_run_exitfuncs", None)), "atexit._run_exitfuncs is gone"
    script = ("import atexit\n"
              "from beam_embed.process.private_apis import stdlib as apis\n"
              "ran = []\n"
              "atexit.register(ran.append, 1)\n"
              "apis.run_atexit_handlers()\n"
              "first = list(ran)\n"
              "apis.run_atexit_handlers()\n"
              "print(first, ran)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout.split("\n")[0] == "[1] [1]"  # ran now, then cleared as an exit leaves them


def test_an_import_that_calls_dict_config_leaves_the_handlers_open(tmp_path, monkeypatch):
    import logging
    import sys

    module = tmp_path / "configures_logging_on_import.py"
    module.write_text("import logging.config\nlogging.config.dictConfig({'version': 1, "
                      "'disable_existing_loggers': False})\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    handler = logging.StreamHandler(open(tmp_path / "log.txt", "w"))
    logging.getLogger("beam_embed.test").addHandler(handler)
    try:
        apis.import_keeping_handlers("configures_logging_on_import")
        assert not handler.stream.closed
        logging.getLogger("beam_embed.test").warning("still open")
        handler.flush()
        assert "still open" in (tmp_path / "log.txt").read_text()
    finally:
        logging.getLogger("beam_embed.test").removeHandler(handler)
        handler.close()
        sys.modules.pop("configures_logging_on_import", None)
