"""The `linformer` command of the wheel: the program built beside the library."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    program = os.path.join(HERE, "bin", "linformer")
    os.execv(program, [program, *sys.argv[1:]])
