"""Python's own private APIs the project relies on: argparse's help-formatter hooks and its table
of option strings, atexit's handler runner, logging's list of every handler made (a library
that calls logging.config.dictConfig when imported closes them all: pymilvus does). Imported by `--help` and flag errors: nothing heavy
here.
"""

from __future__ import annotations

import argparse


class HelpFormatterHooks(argparse.RawDescriptionHelpFormatter):
    """argparse's help formatter with its two private hooks (a flag's spellings as shown, its
    help text) under public names: argparse documents the formatter classes, not their
    methods, and offers no other way to show one spelling of a flag or a default."""

    def shown_option_strings(self, action: argparse.Action) -> list[str]:
        return list(action.option_strings)

    def help_text(self, action: argparse.Action) -> str:
        return super()._get_help_string(action)

    def _format_action_invocation(self, action):
        shown = self.shown_option_strings(action)
        if shown != action.option_strings:
            action = argparse.Action(shown, action.dest, action.nargs, action.const,
                                     action.default, action.type, action.choices,
                                     action.required, action.help, action.metavar)
        return super()._format_action_invocation(action)

    def _get_help_string(self, action):
        return self.help_text(action)


def add_option_string(parser: argparse.ArgumentParser, action: argparse.Action,
                      flag: str) -> bool:
    """Makes `flag` one more spelling of `action` (already on `parser`); False when another
    action has it. argparse takes every spelling at add_argument time and has no public way to
    add one after (a BooleanOptionalAction makes its --no-x spellings itself)."""
    if flag in parser._option_string_actions:
        return False
    action.option_strings.append(flag)
    parser._option_string_actions[flag] = action
    return True


def option_strings(parser: argparse.ArgumentParser) -> set[str]:
    """Every option string `parser` takes (both spellings, --no-x). argparse keeps its actions
    private, and Beam's options add theirs to the parser Beam hands them."""
    return {s for a in parser._actions for s in a.option_strings}


def run_atexit_handlers() -> None:
    """Runs (and clears) the `atexit` handlers now, as a normal exit would: for a process that
    ends through os._exit, which skips them. atexit has no public way to run them; a Python
    without the private function runs none (what os._exit alone does)."""
    import atexit

    run = getattr(atexit, "_run_exitfuncs", None)
    if run is not None:
        run()


def import_keeping_handlers(name: str):
    """Imports the module `name` without letting a logging.config.dictConfig at its import close
    the handlers the process already has (the host's, pytest's, Beam's): dictConfig flushes and
    closes whatever logging's private handler list holds, so the list is held aside meanwhile."""
    import importlib
    import logging

    held = logging._handlerList[:]  # weak references to every handler made so far
    named = dict(logging._handlers)
    logging._handlerList[:] = []
    try:
        return importlib.import_module(name)
    finally:
        logging._handlerList[:0] = held
        for key, handler in named.items():
            logging._handlers.setdefault(key, handler)
