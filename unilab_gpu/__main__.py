"""``python -m unilab_gpu``: the project's main job on its built-in default."""

from unilab_gpu.cli.demo import main

main()
