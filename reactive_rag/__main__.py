import sys

from reactive_rag.cli import main

sys.exit(main())
