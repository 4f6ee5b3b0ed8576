"""hcqsim's own runtime tests run with the sanitizer unless --no-sim-sanitize says otherwise."""


def pytest_configure(config):
    if config.getoption("sim_sanitize") is None:
        config.option.sim_sanitize = True
