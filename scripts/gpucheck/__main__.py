"""``python -m gpucheck`` (with ``scripts/`` on the path): what ``scripts/gpu-check`` runs."""

import sys

from gpucheck.main import main

sys.exit(main())
