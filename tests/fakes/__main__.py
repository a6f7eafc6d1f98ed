from tests.fakes import _main

_main()
