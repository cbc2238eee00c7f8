"""`spec-vet inspect`: one inspection of one spectrum, its whole trajectory printed (or as JSON).

Exit codes: 0 the inspection ended with YES, NO or UNDECIDED; 1 it could not finish (unreadable spectrum, engine
down, ERROR verdict); 2 usage or configuration error.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import click

from ..engines.http import DEFAULT_API_KEY_ENV, DEFAULT_TIMEOUT_S
from ..errors import ConfigError, SpecVettingError, TargetNeededError
from ..protocol import MAX_ASSISTANT_TURNS
from .complete import complete_task
from .run_option import command_error

#: the command-line flag of each engine setting, for messages
_SETTING_FLAGS = {"endpoints": "--endpoint", "model": "--model"}


def _engine_options(engine: str, endpoints: tuple[str, ...], model: str | None, device: str,
                    timeout: float, api_key_env: str) -> dict[str, Any]:
    from ..engines import engine_class, engine_options
    from ..types import EngineSettings

    settings = EngineSettings(endpoints=list(endpoints), model=model, api_key_env=api_key_env, timeout_s=timeout,
                              device=device)
    ignored = engine_class(engine).ignored_settings(settings)
    if ignored:
        raise ConfigError(f"{_SETTING_FLAGS[ignored[0]]} is not used by --engine {engine}")
    return engine_options(engine, settings)


def _result_json(result, image_files: dict[int, str]) -> dict[str, Any]:
    turns = []
    for t in result.turns:
        call = t.tool_call
        turns.append({
            "turn": t.index,
            "assistant_text": t.assistant_text,
            "tool_call": None if call is None else {"name": call.name, "arguments": call.arguments,
                                                    "error": call.error},
            "tool_response_text": t.tool_response_text,
            "zoom_window": list(t.zoom_window) if t.zoom_window else None,
            "image_file": image_files.get(t.index),
            "prompt_tokens": t.usage.prompt_tokens,
            "completion_tokens": t.usage.completion_tokens,
            "cached_tokens": t.usage.cached_tokens,
            "latency_s": round(t.latency_s, 4),
            "endpoint": t.endpoint,
            "finish_reason": t.finish_reason,
        })
    return {
        "candidate_id": result.candidate_id, "task": result.task, "verdict": result.verdict,
        "status": result.status, "fallback": result.fallback, "justification": result.justification,
        "reason": result.reason, "error_kind": result.error_kind, "error_message": result.error_message,
        "p_yes": result.p_yes, "p_yes_source": result.p_yes_source, "engine": result.engine,
        "engine_version": result.engine_version, "model": result.model, "prompt_version": result.prompt_version,
        "renderer_version": result.renderer_version, "redshift": result.redshift_used,
        "attempts": result.attempts, "elapsed_s": round(result.elapsed_s, 4), "n_turns": len(result.turns),
        "n_tool_calls": result.n_tool_calls, "full_view_file": image_files.get(-1), "turns": turns,
    }


def _save_images(result, directory: Path) -> dict[int, str]:
    """The pictures, named by turn as the catalog counts turns (from 0; `spec-vet catalog picture` TURN): the full
    view is turn -1."""
    from .output_path import make_folder

    make_folder(directory, "--save-images")
    files: dict[int, str] = {}
    if result.initial_image_png:
        p = directory / "full_view.png"
        p.write_bytes(result.initial_image_png)
        files[-1] = str(p)
    for t in result.turns:
        if t.image_png:
            w = t.zoom_window
            tag = f"zoom_{w[0]:g}-{w[1]:g}" if w else "full"
            p = directory / f"turn{t.index:02d}_{tag}.png"
            p.write_bytes(t.image_png)
            files[t.index] = str(p)
    return files


def _indent(text: str, prefix: str = "    ") -> str:
    return "\n".join(prefix + line for line in (text.splitlines() or [""]))


def _print_readable(result, task, spectrum_label: str, image_files: dict[int, str]) -> None:
    model = f", model {result.model}" if result.model else ""
    click.echo(f"{spectrum_label}: task {task.key} ({task.class_name}), engine {result.engine}{model}, "
               f"prompt {result.prompt_version}")
    if result.redshift_used:
        click.echo(f"zoom windows in the rest frame (z = {result.redshift_used:g})")
    click.echo("turns count from 0, as in the catalog and `spec-vet catalog picture` (-1: the full view)")
    if -1 in image_files:
        click.echo(f"full view: {image_files[-1]}")
    for t in result.turns:
        u = t.usage
        tokens = ""
        if u.prompt_tokens is not None or u.completion_tokens is not None:
            cached = f", {u.cached_tokens} cached" if u.cached_tokens is not None else ""
            tokens = f", {u.prompt_tokens if u.prompt_tokens is not None else '?'} prompt + " \
                     f"{u.completion_tokens if u.completion_tokens is not None else '?'} completion tokens{cached}"
        click.echo(f"\n-- turn {t.index} ({t.latency_s:.2f} s{tokens})")
        click.echo(_indent(t.assistant_text.rstrip()))
        if t.tool_call is not None:
            where = f"zoom {t.zoom_window[0]:g}-{t.zoom_window[1]:g} Å" if t.zoom_window else "tool"
            if t.tool_response_text is None:
                click.echo(f"  -> {where}: not run ({result.reason})")
            else:
                click.echo(f"  -> {where}: {t.tool_response_text}")
            if t.index in image_files:
                click.echo(f"     image: {image_files[t.index]}")
    click.echo("")
    line = f"verdict: {result.verdict}"
    if result.verdict in ("YES", "NO"):
        line += f" ({result.status}{', ' + result.fallback if result.fallback else ''})"
    if result.p_yes is not None:
        line += f", p_yes {result.p_yes:.3f} ({result.p_yes_source})"
    line += f"; {len(result.turns)} turn(s), {result.n_tool_calls} zoom(s), {result.elapsed_s:.2f} s"
    if result.attempts > 1:
        line += f", {result.attempts} attempts"
    click.echo(line)
    if result.justification and result.verdict in ("YES", "NO"):
        click.echo(f"justification: {result.justification}")
    if result.reason:
        click.echo(f"reason: {result.reason}")
    if result.error_kind:
        click.echo(f"error ({result.error_kind}): {result.error_message}")


EPILOG = """\b
Examples:
  spec-vet inspect spec-55862-B6212_sp06-006.fits --task cv              rules engine, no GPU
  spec-vet inspect FILE --task cc --endpoint http://gpu1:30000/v1 --json   Spec-o3 on an SGLang server
  spec-vet inspect coadd.fits --task cv --target TARGETID --endpoint URL1 --endpoint URL2
  spec-vet inspect FILE --task wd --engine local --model ./spec-o3-3b --device cuda --save-images out/

\b
The API key for --endpoint servers is read from the environment variable named by --api-key-env
(SPEC_VETTING_API_KEY by default) and never printed. Exit codes: 0 a verdict or UNDECIDED, 1 the inspection
could not finish (unreadable file, servers down, ERROR verdict), 2 usage or configuration error.
"""


@click.command("inspect", epilog=EPILOG)
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
@click.option("--task", "task_key", required=True, shell_complete=complete_task,
              help="Task key, e.g. cv, carbon (cc), ss, gm, wd.")
@click.option("--target", help="DESI TARGETID, or a row for trimmed multi-target files.")
@click.option("--engine", type=click.Choice(["rules", "local", "openai"]),
              help="Default: openai when --endpoint is given, else rules.")
@click.option("--endpoint", "endpoints", multiple=True,
              help="OpenAI-compatible base URL including /v1 (repeatable), e.g. http://localhost:30000/v1.")
@click.option("--model", help="Served model name (openai; default: first of GET /v1/models) or checkpoint folder "
                              "(local).")
@click.option("--device", default="cpu", show_default=True, help="Device of the local engine (cpu, cuda, cuda:1).")
@click.option("--tasks-file", type=click.Path(exists=True, dir_okay=False), help="YAML file of extra tasks.")
@click.option("--redshift", type=float, help="Redshift for the rest frame (default: the survey pipeline's).")
@click.option("--temperature", type=click.FloatRange(min=0.0), default=0.0, show_default=True,
              help="Sampling temperature (0 is greedy, as the published validation).")
@click.option("--max-tokens", type=click.IntRange(min=1), default=None,
              help="Cap on tokens per assistant turn (default as training: what is left of the 32768-token "
                   "response budget).")
@click.option("--max-turns", type=click.IntRange(min=1), default=MAX_ASSISTANT_TURNS, show_default=True,
              help="Max assistant turns (training used 8).")
@click.option("--logprobs/--no-logprobs", default=False, help="Ask the server for logprobs to compute p_yes.")
@click.option("--timeout", type=click.FloatRange(min=0.0, min_open=True), default=DEFAULT_TIMEOUT_S, show_default=True,
              help="Per-request timeout (openai), s.")
@click.option("--api-key-env", default=DEFAULT_API_KEY_ENV, show_default=True,
              help="Environment variable holding the servers' API key (openai), if they need one.")
@click.option("--time-budget", type=click.FloatRange(min=0.0, min_open=True),
              help="Wall-time budget of the whole inspection, s (counted once the engine takes it).")
@click.option("--title", default="Spectrum", show_default=True,
              help="Plot title; the RL data used the default.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option("--save-images", type=click.Path(file_okay=False), help="Write the full view and each zoom as PNG.")
def inspect_cmd(path, task_key, target, engine, endpoints, model, device, tasks_file, redshift, temperature,
                max_tokens, max_turns, logprobs, timeout, api_key_env, time_budget, title, as_json, save_images):
    """Run one inspection of the spectrum in PATH and print its trajectory."""
    from ..engines import create_engine, default_engine
    from ..inspect.loop import run_inspection
    from ..inspect.tasks import get_task
    from ..pipeline.config import SamplingConfig
    from ..types import InspectionContext
    from .plotting import require_plotting_environment

    require_plotting_environment()
    engine_name = engine or default_engine(bool(endpoints))
    try:
        task = get_task(task_key, tasks_file)
        eng = create_engine(engine_name, **_engine_options(engine_name, endpoints, model, device, timeout,
                                                             api_key_env))
        if eng.costly_start:
            eng.identity()  # checks the model folder from its files, before the spectrum is read or weights load
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from exc
    if save_images:  # made before the inspection runs, so a bad path costs nothing
        from .output_path import output_folder

        output_folder(save_images, "--save-images")

    from ..io import parse_target, read_spectrum
    from ..io.candidate import default_candidate_id

    tgt = parse_target(target)
    try:
        spectrum = read_spectrum(path, tgt)
    except TargetNeededError as exc:  # which spectrum to inspect is the caller's to say: no rerun fixes it
        click.echo(f"error: {exc}; pass --target", err=True)
        sys.exit(2)
    except SpecVettingError as exc:
        raise command_error(exc) from exc
    z = redshift if redshift is not None else spectrum.meta.redshift
    # the id `spec-vet run` gives the same spectrum (a DESI file's one usable target is named by its TARGETID there)
    named = tgt if tgt is not None or spectrum.meta.survey != "desi" else spectrum.meta.ids.get("targetid")
    candidate_id = default_candidate_id(path, named)
    ctx = InspectionContext(candidate_id=candidate_id, task=task.key, spectrum=spectrum, redshift=z)
    sampling = SamplingConfig(temperature=temperature, max_tokens=max_tokens, logprobs=logprobs,
                              top_logprobs=5 if logprobs else 0).to_sampling()

    async def main():
        await eng.start()
        try:
            return await run_inspection(ctx, task, eng, sampling=sampling, max_turns=max_turns,
                                        time_budget_s=time_budget, title=title)
        finally:
            await eng.close()

    try:
        result = asyncio.run(main())
    except ConfigError as exc:  # the engine's configuration is wrong (e.g. a device torch does not see)
        raise click.UsageError(str(exc)) from exc
    except SpecVettingError as exc:  # the engine could not start: servers down, no model listed ...
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    files = _save_images(result, Path(save_images)) if save_images else {}
    if as_json:
        click.echo(json.dumps(_result_json(result, files), indent=2, ensure_ascii=False))
    else:
        _print_readable(result, task, candidate_id, files)
    if result.verdict == "ERROR":
        sys.exit(1)
