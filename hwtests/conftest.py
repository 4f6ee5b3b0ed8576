"""hcqsim's own runtime tests run with the sanitizer unless --no-sim-sanitize says otherwise."""


def pytest_configure(config):
    if config.getoption("hcqsim_sanitize") is None:
        config.option.hcqsim_sanitize = True
