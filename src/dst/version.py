"""dst's version and the name it is published under: each written once (pyproject.toml reads the version from
here; a finding records it; a cluster's workers must have the same)."""

__version__ = "0.1.0"
DISTRIBUTION = "dst-harness"  # on the package index (its "dst" is another project); the import name is dst
