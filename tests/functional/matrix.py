# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""Kernels and hosts the functional tests run on.

A test class on the emulated host has two class attributes, ``kernel`` (a
kernel spec, see :mod:`rdt_virt.emulator.kernels`) and ``profile`` (a
hardware profile). Their defaults come from the environment:

``RDT_VIRT_TEST_KERNEL``   kernel of tests without scenarios (default: the
                           newest release)
``RDT_VIRT_TEST_KERNELS``  comma-separated kernels of :func:`scenarios`
                           (default: 6.1, 6.8, 6.12 and the newest release)
``RDT_VIRT_TEST_HOSTS``    comma-separated hosts of :func:`scenarios`
                           (default: ``intel,amd``; ``aet`` and ``mpam``
                           are the 2026 hosts, see :data:`HOSTS`)

To run a class on the whole matrix, mix in ``testscenarios.WithScenarios``
and set ``scenarios = matrix.scenarios()``: every test then runs once per
kernel and host, with ids such as ``test_x(6.1-amd)``, so a run selects
scenarios by regular expression (``stestr run 'agent.*\\(6\\.1-amd\\)'``)
rather than by copying tests.
"""

import os

from rdt_virt.emulator import kernels

ENV_KERNEL = 'RDT_VIRT_TEST_KERNEL'
ENV_KERNELS = 'RDT_VIRT_TEST_KERNELS'
ENV_HOSTS = 'RDT_VIRT_TEST_HOSTS'

#: Host names of the matrix and the profile that emulates each: ``aet``
#: is Intel with package telemetry (Linux 7.0+), ``mpam`` Arm MPAM (7.1+).
HOSTS = {'intel': 'reference', 'amd': 'amd', 'aet': 'aet', 'mpam': 'mpam'}
#: The hosts a matrix runs unless told otherwise.
DEFAULT_HOSTS = ('intel', 'amd')
#: Hosts that exist only from a kernel release on: older kernels of the
#: matrix are left out for them rather than run on a host without RDT.
MIN_RELEASE = {'aet': '7.0', 'mpam': '7.1'}


def default_kernel():
    """The kernel spec of tests that do not run a matrix."""
    return kernels.get_kernel(os.environ.get(ENV_KERNEL) or None).spec


def _listed(name, default):
    value = os.environ.get(name, '')
    items = [v.strip() for v in value.split(',') if v.strip()]
    return items or list(default)


def _version(release):
    return tuple(int(p) for p in release.split('.'))


def scenarios(kernel_specs=None, hosts=None):
    """testscenarios scenarios for kernels x hosts.

    :param kernel_specs: kernel specs (default: ``RDT_VIRT_TEST_KERNELS``
        or 6.1, 6.8, 6.12 and the newest release).
    :param hosts: names of :data:`HOSTS` or profile names (default:
        ``RDT_VIRT_TEST_HOSTS`` or intel and amd).
    :returns: ``[(name, {'kernel': spec, 'profile': profile}), ...]``.
    """
    kernel_specs = kernel_specs or _listed(ENV_KERNELS,
                                           kernels.MATRIX_RELEASES)
    hosts = hosts or _listed(ENV_HOSTS, DEFAULT_HOSTS)
    out = []
    for spec in kernel_specs:
        kernel = kernels.get_kernel(spec)
        spec = kernel.spec
        for host in hosts:
            since = MIN_RELEASE.get(host)
            if since and _version(kernel.release) < _version(since):
                continue
            out.append(('%s-%s' % (spec, host),
                        {'kernel': spec, 'profile': HOSTS.get(host, host)}))
    return out
