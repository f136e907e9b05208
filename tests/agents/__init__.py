"""Real coding agents (Claude Code, Codex CLI, Gemini CLI), unmodified, through a live ctxc.

How a test uses the harness (tests/agents/test_claude_code.py is the worked example):

1. ``install.installed(install.CODEX)`` (or ``CLAUDE_CODE``, ``GEMINI_CLI``): the CLI's command,
   installed from npm, pinned, into ``$CTXC_AGENTS_CACHE`` (default
   ``$XDG_CACHE_HOME/ctxc-agents/<package>@<version>``), kept between runs, under a file lock
   (safe under pytest-xdist). Missing node/npm or a failed install: a skip, or with ``CI`` set a
   failure. Nothing is downloaded inside the namespace.
2. A stand-in of the provider: a subclass of ``standin.StandIn`` (it serves every path on a
   loopback port and records every request as ``Received``; override ``answer`` to script the
   answers, and set ``seen.kind`` to "main" / "sub" / "side" for model calls and ``seen.answer``
   to "tool:<name>", "text" or "error:<kind>"; ``problem()`` notes what the test must fail on,
   e.g. a signature that came back changed). ``claude_standin.ClaudeStandIn`` is Anthropic's.
   Its constructor takes ``(options, workdir)``; it runs in the scenario's process. Any factory
   of that signature does, returning a context manager with ``url`` and ``report()`` (a dict:
   ``requests``, each with the fields of ``Received``, and ``problems``): e.g. a thin wrapper
   around tests/upstreams.py's ``Upstream`` with a script.
3. ``harness.Scenario``: the stand-in (``"module:Class"``) and its options, the CLI's command
   line and environment, ctxc's settings (``{"CTXC_ANTHROPIC_UPSTREAM": "{standin}"}``), the
   working directory's files, and a timeout. In command, env, files and settings,
   ``{ctxc}`` is ctxc's URL (add the route: ``{ctxc}/anthropic``, ``{ctxc}/openai/v1``,
   ``{ctxc}/gemini``), ``{standin}`` the stand-in's, ``{workdir}``, ``{home}`` and ``{root}`` the
   agent's directory, its HOME and the scenario's directory. ``files`` are relative to the
   working directory: ``"../home/.codex/config.toml"`` lands in the agent's HOME.
4. ``harness.run(scenario, tmp_path)`` runs ``python -m tests.agents.scenario`` under
   ``unshare -n`` (a network namespace with only ``lo``, brought up): it starts the stand-in, a
   real ``ctxc serve`` on a migrated SQLite file with default settings, and ``tap.Tap`` in front
   of ctxc (what the agent really sent, and ctxc's answer headers); runs the CLI with a fresh
   HOME and working directory, killed after the timeout; then reads back every session ctxc
   stored (``GET /v1/sessions``, their messages and their compactions' archives). It returns a
   ``Report``: ``exit_code``, ``timed_out``, ``stdout``, ``stderr``, ``links`` (the namespace's
   interfaces), ``sent`` (the tap's exchanges), ``received`` (the stand-in's requests and
   problems), ``stored`` (the sessions), ``ctxc_log``.
5. ``checks``: the issue's assertions over a report, one function each: ``exited_ok``,
   ``loopback_only``, ``stand_in_clean``, ``no_forks``, ``provider_valid(report, target)``,
   ``within_window(report, window)``, ``task_everywhere(report, task)``,
   ``compactions_at_most(report, 3)``, ``all_stored(report, target, paths)``,
   ``tool_turns(report, 15)``, ``interleaved(report, kinds)``; ``target`` is
   app/domain/validity's name of the request shape ("anthropic", "responses", "gemini").

Run one scenario per module (a module-scoped fixture) and assert on it in several tests. The
tests are ``slow``: ``pytest -m slow tests/agents``. They need root (``unshare -n``), Node 20 and
npm (for the first install).
"""
