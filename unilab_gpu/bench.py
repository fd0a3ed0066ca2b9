"""``python -m unilab_gpu.bench``: the ``unilab-bench`` command (see ``unilab_gpu.cli.bench``)."""

import sys

from unilab_gpu.cli.bench import main

if __name__ == "__main__":
    sys.exit(main())
