"""A path the user named is the name it is: `[ ] * ?` in it match nothing else, in Beam's
pattern matching and in the deletes built on it."""

from __future__ import annotations

import os

import pytest
from apache_beam.io.filebasedsink import FileBasedSink
from apache_beam.io.filesystems import FileSystems

from beam_embed.pipeline.common.run_folder.literal_paths import (
    ExactFinalize,
    delete_files,
    delete_folders,
    escape,
    existing,
    matching,
    size,
)

# each name beside others that it matches as a glob pattern
NAMES = {"exp[1]": ["exp1"], "a*b": ["axb", "a-2024-b"], "what?": ["whats"],
         "[]x": ["]x"], "[!a]": ["b"], "a]b": []}


def _tree(root, names) -> None:
    for name in names:
        (root / name / "sub").mkdir(parents=True)
        (root / name / "file.txt").write_text(name)
        (root / name / "sub" / "part.csv").write_text(name)


# Beam compiles "[[]" (a class holding "["), which Python's re flags as a possible nested set
@pytest.mark.filterwarnings("ignore:Possible nested set:FutureWarning")
@pytest.mark.parametrize("name", sorted(NAMES))
def test_an_escaped_path_matches_itself_and_nothing_else_in_beams_match(tmp_path, name):
    _tree(tmp_path, [name, *NAMES[name]])
    path = str(tmp_path / name / "file.txt")
    found = [m.path for m in FileSystems.match([escape(path)])[0].metadata_list]
    assert found == [path]
    below = FileSystems.match([escape(str(tmp_path / name)) + "/**"])[0].metadata_list
    assert sorted(m.path for m in below) == [path, str(tmp_path / name / "sub" / "part.csv")]


@pytest.mark.parametrize("name", sorted(NAMES))
def test_matching_lists_and_deletes_touch_only_the_named_folder(tmp_path, name):
    others = NAMES[name]
    _tree(tmp_path, [name, *others])
    folder = tmp_path / name
    assert sorted(matching(str(folder), ["*.txt", "sub/*"])) == [
        str(folder / "file.txt"), str(folder / "sub" / "part.csv")]
    assert size(str(folder / "file.txt")) == len(name) and size(str(folder / "nothing")) is None
    assert existing([str(folder / "file.txt"), str(folder / "gone.txt")]) == {
        str(folder / "file.txt")}
    delete_files([str(folder / "file.txt")])
    assert not (folder / "file.txt").exists()
    delete_folders([str(folder)])
    assert not folder.exists()
    for other in others:  # every file of the folders the name matches as a pattern, as it was
        assert (tmp_path / other / "file.txt").read_text() == other
        assert (tmp_path / other / "sub" / "part.csv").read_text() == other


def test_a_local_folder_is_never_deleted_through_a_link(tmp_path):
    (tmp_path / "theirs").mkdir()
    (tmp_path / "theirs" / "keep.txt").write_text("theirs")
    (tmp_path / "link").symlink_to(tmp_path / "theirs")
    with pytest.raises(OSError):
        delete_folders([str(tmp_path / "link")])
    assert (tmp_path / "theirs" / "keep.txt").read_text() == "theirs"


class _Sink(ExactFinalize, FileBasedSink):
    pass


def test_a_sinks_finalize_renames_its_own_files_in_a_folder_named_like_a_pattern(tmp_path):
    _tree(tmp_path, ["exp1"])  # a folder that "exp[1]" matches as a pattern
    sink = _Sink(str(tmp_path / "exp[1]" / "part"), coder=None, file_name_suffix=".txt",
                 shard_name_template="-SSSSS-of-NNNNN")
    init = sink.initialize_write()
    temps = []
    for uid in ("a", "b"):
        temps.append(os.path.join(init, uid + ".txt"))
        with open(temps[-1], "w") as f:
            f.write(uid)
    sink.pre_finalize(init, temps)
    shards = list(sink.finalize_write(init, temps, None))
    assert shards == [str(tmp_path / "exp[1]" / f"part-0000{i}-of-00002.txt") for i in (0, 1)]
    assert [open(p).read() for p in shards] == ["a", "b"]
    assert (tmp_path / "exp1" / "file.txt").read_text() == "exp1"
    assert sorted(p.name for p in (tmp_path / "exp1").iterdir()) == ["file.txt", "sub"]
