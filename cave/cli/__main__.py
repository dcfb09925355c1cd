from cave.cli import main

raise SystemExit(main())
