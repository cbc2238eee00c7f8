"""Tasks: built-ins, aliases, user YAML files, SpecVI-Bench prompt import, versions."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spec_vetting.errors import ConfigError
from spec_vetting.inspect.prompts import specvi_task_prompts, strip_image_placeholder
from spec_vetting.inspect.tasks import Task, dump_tasks_yaml, get_task, list_tasks, load_tasks_file

EXPECTED = {
    "cv": "Cataclysmic Variables (CV)",
    "carbon": "Carbon Star (C-type)",
    "ss": "S-type Star",
    "gm": "M-type Giant",
    "wd": "White Dwarf",
}


def test_builtin_tasks_follow_the_known_structure():
    tasks = {t.key: t for t in list_tasks()}
    assert set(tasks) == set(EXPECTED)
    for key, name in EXPECTED.items():
        t = tasks[key]
        assert t.class_name == name
        first = t.prompt.splitlines()[0]
        assert first == f"Analyze the provided spectrum to determine if it is a **{name}**."
        assert "Key visual indicators" in t.prompt and "Primary" in t.prompt and "Secondary" in t.prompt
        assert "Confusers" in t.prompt
        assert not t.prompt.startswith("\n") and "<image>" not in t.prompt
        assert t.version.startswith("builtin-") and len(t.version) > len("builtin-")
        assert t.source == "builtin"


def test_alias_and_case():
    assert get_task("cc").key == "carbon"
    assert get_task("CV").key == "cv"


def test_unknown_task_names_known_ones():
    with pytest.raises(ConfigError, match="unknown task 'qso'.*cv.*--tasks-file"):
        get_task("qso")


def test_version_changes_with_prompt():
    a = Task(key="x", class_name="X", prompt="Analyze ... **X**.")
    b = Task(key="x", class_name="X", prompt="Analyze ... **X**. more")
    assert a.version != b.version and a.version.startswith("user-")
    assert Task(key="x", class_name="X", prompt="p", version="mine").version == "mine"


def test_user_tasks_file_adds_and_overrides(tmp_path):
    f = tmp_path / "tasks.yaml"
    f.write_text(
        "tasks:\n"
        "  - key: qso\n"
        "    class_name: Quasar (QSO)\n"
        "    aliases: [quasar]\n"
        "    prompt: |-\n"
        "      Analyze the provided spectrum to determine if it is a **Quasar (QSO)**.\n"
        "      - broad emission lines\n"
        "  - key: cv\n"
        "    prompt: \"<image>\\nAnalyze the provided spectrum to determine if it is a **My CV**.\"\n"
    )
    assert get_task("quasar", f).class_name == "Quasar (QSO)"
    cv = get_task("cv", f)
    assert cv.class_name == "My CV" and cv.prompt.startswith("Analyze") and cv.source == "user"
    assert [t.key for t in list_tasks(f)][:2] == ["qso", "cv"]
    assert get_task("wd", f).source == "builtin"


@pytest.mark.parametrize(
    "content, match",
    [
        ("tasks: 3", "expected a list"),
        ("tasks:\n  - key: a\n", "task #1 \\(a\\).*class_name"),
        ("tasks:\n  - key: 'a b'\n    class_name: A\n    prompt: p\n", "without spaces"),
        ("tasks:\n  - [1]\n", "mapping"),
        ("tasks: [\n", "not valid YAML"),
        ("tasks:\n  - key: a\n    class_name: A\n    prompt: 'x <image> y'\n", "placeholder"),
    ],
)
def test_bad_tasks_file(tmp_path, content, match):
    f = tmp_path / "bad.yaml"
    f.write_text(content)
    with pytest.raises(ConfigError, match=match) as info:
        load_tasks_file(f)
    assert str(f) in str(info.value)


def test_missing_tasks_file(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        load_tasks_file(tmp_path / "nope.yaml")


def test_yaml_round_trip_keeps_prompts_byte_for_byte(tmp_path):
    tricky = Task(key="t", class_name="T", prompt="Line 1 **T**.\n\n- a: b # not a comment\n  indented 'q' \"dq\"\n",
                  source="specvi")
    f = tmp_path / "t.yaml"
    f.write_text(dump_tasks_yaml([tricky, *list_tasks()]))
    back = load_tasks_file(f)
    assert back[0] == tricky
    assert back[1:] == list_tasks()


def test_strip_image_placeholder():
    assert strip_image_placeholder("<image>\nAnalyze") == "Analyze"
    assert strip_image_placeholder("<image>Analyze") == "Analyze"
    assert strip_image_placeholder("Analyze") == "Analyze"
    with pytest.raises(ConfigError):
        strip_image_placeholder("<image>a<image>")


def test_with_prompt_for_candidate_prompts():
    cv = get_task("cv")
    same = cv.with_prompt("<image>\n" + cv.prompt)
    assert same is cv
    other = cv.with_prompt("<image>\nAnalyze the provided spectrum to determine if it is a **Cataclysmic**.\n- x")
    assert other.key == "cv" and other.source == "inline" and other.version.startswith("inline-")
    assert other.prompt.startswith("Analyze") and other.version != cv.version


def _specvi_file(path, rows):
    msg = pa.struct([("content", pa.string()), ("role", pa.string())])
    table = pa.table({
        "data_source": pa.array([r[0] for r in rows]),
        "prompt": pa.array([[{"content": "You are a helpful assistant.", "role": "system"},
                             {"content": r[1], "role": "user"}] for r in rows], type=pa.list_(msg)),
    })
    pq.write_table(table, path)


def test_specvi_prompts_and_cli_import(tmp_path):
    from click.testing import CliRunner

    from spec_vetting.cli import main

    text = "Analyze the provided spectrum to determine if it is a **Carbon Star (C-type)**.\n- C2 bands  \n"
    f = tmp_path / "test_cc.parquet"
    _specvi_file(f, [("cc", "<image>\n" + text), ("cc", "<image>\n" + text), ("cv", "<image>\nAnalyze **CV**.")])
    sentence = "You are a helpful assistant."
    assert specvi_task_prompts(f) == {"carbon": (text, sentence), "cv": ("Analyze **CV**.", sentence)}

    out = tmp_path / "tasks.yaml"
    res = CliRunner().invoke(main, ["tasks", "import-specvi", str(f), "-o", str(out)])
    assert res.exit_code == 0, res.output
    carbon = get_task("cc", out)
    assert carbon.prompt == text and carbon.source == "specvi" and carbon.class_name == "Carbon Star (C-type)"
    # importing a second file merges into the same YAML
    g = tmp_path / "test_wd.parquet"
    _specvi_file(g, [("wd", "<image>\nAnalyze the provided spectrum to determine if it is a **White Dwarf**.")])
    res = CliRunner().invoke(main, ["tasks", "import-specvi", str(g), "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert {t.key for t in load_tasks_file(out)} == {"carbon", "cv", "wd"}


def test_cli_import_specvi_unwritable_output_is_a_usage_error(tmp_path):
    from click.testing import CliRunner

    from spec_vetting.cli import main

    f = tmp_path / "test_cv.parquet"
    _specvi_file(f, [("cv", "<image>\nAnalyze the provided spectrum to determine if it is a **CV**.")])
    (tmp_path / "a-file").write_text("x")
    out = tmp_path / "a-file" / "tasks.yaml"  # a missing folder is created; one under a file cannot be
    res = CliRunner().invoke(main, ["tasks", "import-specvi", str(f), "-o", str(out)])
    assert res.exit_code == 2 and f"-o {out}" in res.output and "is a file, not a folder" in res.output
    assert res.exception is None or isinstance(res.exception, SystemExit)
    made = tmp_path / "no-such-dir" / "tasks.yaml"
    assert CliRunner().invoke(main, ["tasks", "import-specvi", str(f), "-o", str(made)]).exit_code == 0
    assert "cv" in made.read_text(encoding="utf-8")


def test_specvi_bad_file(tmp_path):
    f = tmp_path / "x.parquet"
    pq.write_table(pa.table({"a": [1]}), f)
    with pytest.raises(ConfigError, match="data_source and prompt"):
        specvi_task_prompts(f)


def test_cli_tasks_list_and_show(tmp_path):
    from click.testing import CliRunner

    from spec_vetting.cli import main

    res = CliRunner().invoke(main, ["tasks", "list"])
    assert res.exit_code == 0
    for key in EXPECTED:
        assert key in res.output
    res = CliRunner().invoke(main, ["tasks", "show", "cc"])
    assert res.exit_code == 0 and "**Carbon Star (C-type)**" in res.output and "builtin-" in res.output
    res = CliRunner().invoke(main, ["tasks", "show", "nope"])
    assert res.exit_code == 2 and "unknown task" in res.output


def test_unreadable_tasks_files_are_config_errors_naming_the_file(tmp_path):
    from spec_vetting.errors import ConfigError
    from spec_vetting.inspect.tasks import load_tasks_file

    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"\xff\xfe\x00")
    broken = tmp_path / "broken.yaml"
    broken.write_text("tasks: [\n")
    for path, words in ((binary, "not UTF-8"), (broken, "not valid YAML"), (tmp_path / "missing.yaml", "cannot read")):
        with pytest.raises(ConfigError, match=words) as info:
            load_tasks_file(path)
        assert str(path) in str(info.value)


def test_tasks_file_is_parsed_once_per_version(tmp_path, monkeypatch):
    import os

    from spec_vetting.inspect import tasks as tasks_module

    path = tmp_path / "t.yaml"
    path.write_text("tasks:\n  - key: hot\n    class_name: O/B star\n    prompt: 'Analyze the provided spectrum to "
                    "determine if it is an **O/B star**.'\n")
    reads = []
    real = tasks_module.read_yaml_file
    monkeypatch.setattr(tasks_module, "read_yaml_file", lambda *a: reads.append(a) or real(*a))
    first = [tasks_module.get_task("hot", path) for _ in range(5)]
    assert len(reads) == 1 and all(t == first[0] for t in first)
    path.write_text(path.read_text().replace("O/B star", "hot star"))
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # an edit is always read again
    assert tasks_module.get_task("hot", path).class_name == "hot star" and len(reads) == 2


def _hub_cache(cache, sha, files):
    """A folder laid out like huggingface_hub's cache for the dataset (refs/main -> snapshots/<sha>/...)."""
    repo = cache / "datasets--Maxwell-Jia--SpecVI-Bench"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(sha)
    for name, rows in files.items():
        path = repo / "snapshots" / sha / "benchmark" / "data" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        _specvi_file(path, rows)


def test_import_specvi_from_the_hub_cache_offline(tmp_path, monkeypatch):
    pytest.importorskip("huggingface_hub")
    from click.testing import CliRunner

    from spec_vetting.cli import main
    from spec_vetting.io.specvi_hub import SPECVI_TASK_FILES, fetch_specvi, resolved_revision

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # no network in tests, whatever the machine has
    sha = "0123456789abcdef0123456789abcdef01234567"
    source = {"cc": "carbon", "cv": "cv", "gm": "gm", "ss": "ss", "wd": "wd"}
    files = {f"train_{t}.parquet": [(source[t], f"<image>\nAnalyze the provided spectrum to determine if it is a "
                                                f"**Task {t}**.\n- x")] for t in SPECVI_TASK_FILES}
    cache = tmp_path / "hub"
    _hub_cache(cache, sha, files)
    paths = fetch_specvi(("train",), cache_dir=cache, local_files_only=True)
    assert [p.name for p in paths] == [f"train_{t}.parquet" for t in SPECVI_TASK_FILES]
    assert {resolved_revision(p) for p in paths} == {sha}
    assert fetch_specvi(("train",), revision=sha, cache_dir=cache, local_files_only=True) == paths  # pinned sha

    out = tmp_path / "tasks.yaml"
    res = CliRunner().invoke(main, ["tasks", "import-specvi", "--from-hub", "--offline", "--cache-dir", str(cache),
                                    "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert sha in res.output
    assert get_task("wd", out).prompt.endswith("**Task wd**.\n- x") and get_task("cc", out).source == "specvi"
    # not in the cache and no network: a clear usage error, not a traceback
    res = CliRunner().invoke(main, ["tasks", "import-specvi", "--from-hub", "--offline", "--cache-dir",
                                    str(tmp_path / "empty"), "-o", str(out)])
    assert res.exit_code == 2 and "cannot get Maxwell-Jia/SpecVI-Bench" in res.output
