from ._console import entry

entry()
