import pathlib

PROJECT_ROOT = pathlib.Path(__file__).resolve().parent.parent
FIXTURES_ROOT = PROJECT_ROOT / "fixtures"
SHARED_DATA = PROJECT_ROOT.parent / "shared" / "data"
