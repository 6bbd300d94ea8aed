from torchpace.cli import main

raise SystemExit(main())
