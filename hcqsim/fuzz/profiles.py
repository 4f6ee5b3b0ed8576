"""The fuzz profiles: hypothesis settings for CI (short, derandomized) and nightly (long, random) searches, as
`fuzz_settings()` and as hypothesis profiles `hcqsim-<name>` (registered by the pytest plugin)."""
from __future__ import annotations

import os

from hypothesis import HealthCheck, Phase, settings

_QUIET = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]
# no "explain" phase: it re-runs the shrunk failure dozens of times to say which parts matter (a third of a
# mutation test's time), and the race report already says what happened
_PHASES = [Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink]
PROFILES = {
    # CI: a fixed, short search (the same examples on every worker and every run)
    "default": dict(max_examples=100, derandomize=True, database=None, deadline=None, suppress_health_check=_QUIET,
                    phases=_PHASES),
    # nightly: long random searches
    "nightly": dict(max_examples=3000, derandomize=False, deadline=None, suppress_health_check=_QUIET,
                    phases=_PHASES),
}
HYPOTHESIS_PROFILE_PREFIX = "hcqsim-"  # PROFILES as hypothesis knows them: hcqsim-default, hcqsim-nightly


def register_profiles() -> None:
    """Register PROFILES with hypothesis as hcqsim-<name>, so `pytest --hypothesis-profile hcqsim-nightly`
    selects one (fuzz_settings() follows the loaded profile). The pytest plugin calls this when it loads."""
    for name, kw in PROFILES.items():
        settings.register_profile(HYPOTHESIS_PROFILE_PREFIX + name, **kw)


def _profile_name(profile: str | None) -> str:
    if profile:
        return profile
    if os.environ.get("HCQSIM_FUZZ"):
        return os.environ["HCQSIM_FUZZ"]
    loaded = getattr(settings, "_current_profile", "") or ""
    if loaded.startswith(HYPOTHESIS_PROFILE_PREFIX) and loaded[len(HYPOTHESIS_PROFILE_PREFIX):] in PROFILES:
        return loaded[len(HYPOTHESIS_PROFILE_PREFIX):]
    return "default"


def fuzz_settings(profile: str | None = None, **overrides) -> settings:
    """The settings of a fuzz profile: `profile`, else $HCQSIM_FUZZ, else the hypothesis profile pytest loaded
    (`--hypothesis-profile hcqsim-<name>`), else "default". $HCQSIM_FUZZ_DB names a shared directory example
    database (a failure found by any worker replays on all)."""
    name = _profile_name(profile)
    if name not in PROFILES:
        raise ValueError(f"unknown fuzz profile {name!r}: {', '.join(PROFILES)}")
    kw = dict(PROFILES[name])
    db = os.environ.get("HCQSIM_FUZZ_DB")
    if db:
        from hypothesis.database import DirectoryBasedExampleDatabase
        kw["database"] = DirectoryBasedExampleDatabase(db)
    kw.update(overrides)
    return settings(**kw)
