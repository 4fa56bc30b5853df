"""PassRegistry: names, defaults, order, user overrides, rules files and installed packages."""

from __future__ import annotations

import sys
import textwrap

import pytest

from scopefusion.errors import FusionError
from scopefusion.scope import BUILTIN, ENTRY_POINT_GROUP, PassRegistry, ScopeBasePass


def make_pass(pass_name: str, is_general: bool = False) -> type[ScopeBasePass]:
    return type(pass_name, (ScopeBasePass,), {"name": pass_name, "general": is_general})


LayerNorm = make_pass("LayerNorm", True)
Gelu = make_pass("Gelu")
Lstm = make_pass("Lstm")


def test_general_passes_are_on_others_off_until_enabled():
    registry = PassRegistry()
    registry.load_builtins([LayerNorm, Gelu])
    assert [(e.name, e.general, e.enabled, e.source) for e in registry.passes()] == [
        ("LayerNorm", True, True, BUILTIN), ("Gelu", False, False, BUILTIN)]
    assert [e.name for e in registry.enabled_passes()] == ["LayerNorm"]
    registry.enable("Gelu")
    registry.disable("LayerNorm")
    assert [e.name for e in registry.enabled_passes()] == ["Gelu"]


def test_register_overrides_name_and_flag():
    registry = PassRegistry()
    entry = registry.register(Gelu(), name="MyGelu", general=True)
    assert (entry.name, entry.general, entry.enabled, entry.source) == ("MyGelu", True, True, "user")
    assert entry.rule.pass_name == "MyGelu" and "MyGelu" in registry and registry.get("MyGelu") is entry
    assert entry.to_dict() == {"name": "MyGelu", "general": True, "source": "user", "enabled": True}


def test_user_passes_run_before_builtins_in_registration_order():
    registry = PassRegistry()
    registry.load_builtins([LayerNorm])
    registry.register(make_pass("UserB", True))
    registry.register(make_pass("UserA", True))
    assert registry.names() == ["UserB", "UserA", "LayerNorm"]


@pytest.mark.parametrize("builtins_first", [True, False])
def test_a_user_pass_with_a_builtins_name_replaces_it(builtins_first):
    registry = PassRegistry()
    mine = make_pass("LayerNorm", True)
    if builtins_first:
        registry.load_builtins([LayerNorm, Gelu])
        registry.register(mine)
    else:
        registry.register(mine)
        registry.load_builtins([LayerNorm, Gelu])
    assert registry.names() == ["LayerNorm", "Gelu"]
    assert isinstance(registry.passes()[0].rule, mine) and registry.passes()[0].source == "user"
    assert [str(r) for r in registry.replacements] == ["pass 'LayerNorm' from user replaces the builtin pass of that name"]
    assert len(registry) == 2


def test_two_user_passes_with_one_name_is_an_error():
    registry = PassRegistry()
    registry.load_builtins([LayerNorm])
    registry.register(Gelu)
    with pytest.raises(FusionError) as info:
        registry.register(make_pass("Gelu"), source="file:rules.py")
    assert str(info.value) == (
        "pass name 'Gelu' from file:rules.py is already registered from user; rename one of them "
        "(known passes: Gelu, LayerNorm)"
    )


def test_two_builtins_with_one_name_is_an_error():
    with pytest.raises(FusionError, match="pass name 'Gelu' from builtin is already registered from builtin"):
        PassRegistry().load_builtins([Gelu, make_pass("Gelu")])


def test_unknown_names_in_enable_or_disable_list_the_known_ones():
    registry = PassRegistry()
    registry.load_builtins([LayerNorm, Gelu])
    with pytest.raises(FusionError) as info:
        registry.enable("Gleu")
    assert str(info.value) == "enable: unknown pass name(s) 'Gleu'; known passes: LayerNorm, Gelu"
    with pytest.raises(FusionError, match="disable: unknown pass name"):
        registry.disable("x")
    with pytest.raises(FusionError, match="configure: unknown pass name\\(s\\) 'nope'"):
        registry.configure(enable=["Gelu"], disable=["nope"])
    assert not registry.get("Gelu").enabled  # nothing changed
    registry.configure(enable=["Gelu"], disable=["LayerNorm"])
    assert [e.name for e in registry.enabled_passes()] == ["Gelu"]


def test_only_passes_can_be_registered():
    registry = PassRegistry()
    with pytest.raises(FusionError, match="expected a ScopeBasePass instance or subclass"):
        registry.register(lambda: None)

    class NeedsArgs(ScopeBasePass):
        def __init__(self, x):
            self.x = x

    with pytest.raises(FusionError, match="cannot be created without arguments"):
        registry.register(NeedsArgs)
    with pytest.raises(FusionError, match="non-empty string"):
        registry.register(Gelu, name="")


def test_registries_are_independent():
    a, b = PassRegistry(), PassRegistry()
    a.load_builtins([LayerNorm])
    assert len(b) == 0 and b.passes() == []


def test_builtin_instances_loaded_into_many_registries_give_each_its_own_entries():
    rules = (LayerNorm(), Gelu())
    a, b = PassRegistry(), PassRegistry()
    a.load_builtins(rules)
    b.load_builtins(rules)
    assert [e.rule for e in a.passes()] == list(rules) and a.get("LayerNorm") is not b.get("LayerNorm")
    a.configure(enable=["Gelu"], disable=["LayerNorm"])
    assert [e.name for e in a.enabled_passes()] == ["Gelu"]
    assert [e.name for e in b.enabled_passes()] == ["LayerNorm"]
    rules[1].name, rules[1].general = "MyGelu", True  # an instance changed between loads is read again
    c = PassRegistry()
    c.load_builtins(rules)
    assert [(e.name, e.enabled, e.source) for e in c.passes()] == [("LayerNorm", True, BUILTIN), ("MyGelu", True, BUILTIN)]
    mine = make_pass("LayerNorm", True)  # a user pass registered first still replaces its builtin
    d = PassRegistry()
    d.register(mine)
    d.load_builtins(rules)
    assert isinstance(d.passes()[0].rule, mine) and len(d.replacements) == 1
    with pytest.raises(FusionError, match="already registered"):
        PassRegistry().load_builtins((rules[0], rules[0]))


# ---------------------------------------------------------------------- rules files
RULES_FILE = '''
from scopefusion.scope import NodeOpTypeFeature, ScopeBasePass, ScopePattern, scope_rule


class MyLayerNorm(ScopeBasePass):
    name = "LayerNorm"
    general = True


@scope_rule(ScopePattern("gelu", NodeOpTypeFeature("Erf", 1)), name="FileGelu", type="Gelu")
def file_gelu(scope, result, graph):
    return None


FUSION_RULES = [MyLayerNorm, file_gelu]


def register(registry):
    registry.register(MyLayerNorm(), name="Registered")
'''


def test_load_rules_file(tmp_path):
    path = tmp_path / "my_rules.py"
    path.write_text(RULES_FILE)
    registry = PassRegistry()
    registry.load_builtins([LayerNorm])
    added = registry.load_rules_file(path)
    assert [(e.name, e.source) for e in added] == [
        ("LayerNorm", f"file:{path}"), ("FileGelu", f"file:{path}"), ("Registered", f"file:{path}")]
    assert registry.names() == ["LayerNorm", "FileGelu", "Registered"]
    assert registry.get("LayerNorm").source == f"file:{path}"
    assert [str(r) for r in registry.replacements] == [f"pass 'LayerNorm' from file:{path} replaces the builtin pass of that name"]
    # Later direct registrations are 'user' again.
    assert registry.register(Lstm).source == "user"


def test_rules_file_that_fails_to_import(tmp_path):
    path = tmp_path / "broken.py"
    path.write_text("import scopefusion\nraise ValueError('bad epsilon table')\n")
    with pytest.raises(FusionError) as info:
        PassRegistry().load_rules_file(path)
    assert str(info.value) == f"cannot load fusion rules from {path}: ValueError: bad epsilon table; fix the file"
    syntax = tmp_path / "syntax.py"
    syntax.write_text("def (:\n")
    with pytest.raises(FusionError, match=f"cannot load fusion rules from {syntax}: SyntaxError"):
        PassRegistry().load_rules_file(syntax)


def test_rules_file_errors(tmp_path):
    with pytest.raises(FusionError, match="does not exist"):
        PassRegistry().load_rules_file(tmp_path / "missing.py")
    empty = tmp_path / "empty.py"
    empty.write_text("X = 1\n")
    with pytest.raises(FusionError, match="defines none of FUSION_RULES, FUSED_OPS and register"):
        PassRegistry().load_rules_file(empty)
    bad = tmp_path / "bad.py"
    bad.write_text("FUSION_RULES = 'LayerNorm'\n")
    with pytest.raises(FusionError, match="must be passes or a list of passes"):
        PassRegistry().load_rules_file(bad)
    raising = tmp_path / "raising.py"
    raising.write_text("def register(registry):\n    raise KeyError('x')\n")
    with pytest.raises(FusionError, match=f"register\\(registry\\) from {raising} failed: KeyError"):
        PassRegistry().load_rules_file(raising)


# ---------------------------------------------------------------------- installed packages
def _install(tmp_path, monkeypatch, dist: str, module: str, source: str, entry_points: str) -> None:
    (tmp_path / f"{module}.py").write_text(textwrap.dedent(source))
    info = tmp_path / f"{dist}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{entry_points}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, module, raising=False)


def test_entry_points_from_an_installed_package(tmp_path, monkeypatch):
    _install(
        tmp_path,
        monkeypatch,
        "acme_rules",
        "acme_rules_mod",
        """
        from scopefusion.scope import ScopeBasePass

        class AcmeNorm(ScopeBasePass):
            name = "LayerNorm"
            general = True

        class AcmeGelu(ScopeBasePass):
            name = "AcmeGelu"

        def register(registry):
            registry.register(AcmeGelu)
        """,
        "norm = acme_rules_mod:AcmeNorm\nmore = acme_rules_mod:register",
    )
    registry = PassRegistry()
    registry.load_builtins([LayerNorm])
    added = registry.load_entry_points()
    assert [(e.name, e.source) for e in added] == [("AcmeGelu", "package:acme_rules"), ("LayerNorm", "package:acme_rules")]
    assert registry.get("LayerNorm").source == "package:acme_rules"
    assert [str(r) for r in registry.replacements] == [
        "pass 'LayerNorm' from package:acme_rules replaces the builtin pass of that name"]


def test_entry_point_that_fails_to_load(tmp_path, monkeypatch):
    _install(tmp_path, monkeypatch, "broken_rules", "broken_rules_mod", "raise ImportError('no numpy here')\n", "x = broken_rules_mod:Rule")
    with pytest.raises(FusionError) as info:
        PassRegistry().load_entry_points()
    assert str(info.value) == (
        "cannot load fusion rules from entry point 'x' (broken_rules_mod:Rule) of package broken_rules: "
        "ImportError: no numpy here"
    )


def test_no_entry_points_is_fine():
    assert PassRegistry().load_entry_points(group="scopefusion.no_such_group") == []


def test_a_package_installed_after_a_first_look_is_found(tmp_path, monkeypatch):
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    assert PassRegistry().load_entry_points() == []  # the answer for this sys.path is kept...
    later = site / "late_rules-1.0.dist-info"
    later.mkdir()  # ...until a package is installed into one of its directories
    (later / "METADATA").write_text("Metadata-Version: 2.1\nName: late_rules\nVersion: 1.0\n")
    (later / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\nlate = late_rules_mod:register\n")
    (site / "late_rules_mod.py").write_text(
        "from scopefusion.scope import ScopeBasePass\n\n"
        "class LateRule(ScopeBasePass):\n    name = 'LateRule'\n\n"
        "def register(registry):\n    registry.register(LateRule)\n"
    )
    monkeypatch.delitem(sys.modules, "late_rules_mod", raising=False)
    assert [(e.name, e.source) for e in PassRegistry().load_entry_points()] == [("LateRule", "package:late_rules")]
