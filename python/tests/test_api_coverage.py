"""Every public name of the package is used by some test (so each function and class is
tested): a name added without a test fails here."""

import pathlib
import re

import kiln

TESTS = pathlib.Path(__file__).parent
EXAMPLES = TESTS.parents[1] / "examples" / "python"


def test_every_public_name_is_exercised():
    sources = "\n".join(p.read_text() for p in [*TESTS.glob("test_*.py"), *EXAMPLES.glob("*.py")] if p.name != pathlib.Path(__file__).name)
    public = [n for n in dir(kiln) if not n.startswith("_") and n not in {"annotations"}]
    modules = {"nn", "compilation"}
    missing = [
        n for n in public
        if n not in modules and not re.search(rf"(kiln\.{n}\b|import[^\n]*\b{n}\b|^\s+{n},?$)", sources, re.M)
    ]
    assert not missing, f"public names no test or example uses: {missing}"
    nn_missing = [n for n in dir(kiln.nn) if not n.startswith("_") and f"nn.{n}" not in sources]
    assert not nn_missing, f"kiln.nn layers no test uses: {nn_missing}"
