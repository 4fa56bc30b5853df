"""installed_entry_points: importlib.metadata's answer, asked only when some distribution names the group."""

from __future__ import annotations

from scopefusion.scope.entry_points import installed_entry_points

GROUP = "scopefusion.test_entry_points_group"


def _dist_info(root, dist: str, entry_points: str) -> None:
    info = root / f"{dist}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(entry_points)


def test_a_distribution_installed_on_the_path_later_is_found(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    assert installed_entry_points(GROUP) == []
    _dist_info(tmp_path, "other_pkg", "[console_scripts]\nother = other_pkg:main\n")
    assert installed_entry_points(GROUP) == []
    _dist_info(tmp_path, "Rules_Pkg", f"[{GROUP}]\nnorm = rules_pkg:NORM\n")
    points = installed_entry_points(GROUP)
    assert [(ep.name, ep.value, ep.group, ep.dist.name) for ep in points] == [("norm", "rules_pkg:NORM", GROUP, "Rules_Pkg")]


def test_a_group_named_only_outside_a_section_header_gives_importlib_metadata_answer(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    _dist_info(tmp_path, "mentions", f"[console_scripts]\ntool = mentions:{GROUP.replace('.', '_')}\n# {GROUP}\n")
    assert installed_entry_points(GROUP) == []


def test_importlib_metadata_is_asked_only_when_a_distribution_names_the_group(tmp_path, monkeypatch):
    import importlib.metadata

    asked = []
    real = importlib.metadata.entry_points
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda **kw: asked.append(kw) or real(**kw))
    monkeypatch.syspath_prepend(str(tmp_path))
    assert installed_entry_points(GROUP) == [] and asked == []
    _dist_info(tmp_path, "rules_pkg", f"[{GROUP}]\nnorm = rules_pkg:NORM\n")
    assert [ep.name for ep in installed_entry_points(GROUP)] == ["norm"] and asked == [{"group": GROUP}]
