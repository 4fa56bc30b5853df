"""``python -m scopefusion``: the command line."""

from .cli import main

main()
