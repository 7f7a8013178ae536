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

"""Aggregate ``list_opts`` for oslo-config-generator and the docs.

Add a module's name to ``_MODULES`` when it defines a new option group.
"""

import importlib

_MODULES = (
    'rdt',
    'agent',
)


def list_opts():
    """Return ``[(group, [opts])]`` for every rdt-virt option group."""
    result = []
    for name in _MODULES:
        module = importlib.import_module('rdt_virt.conf.' + name)
        for group, opts in module.list_opts().items():
            result.append((group, opts))
    return result
