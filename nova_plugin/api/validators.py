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

"""Nova API validators for the RDT flavor extra specs.

Loaded by nova-api through the entry point ``nova.api.extra_spec_validators``
(``rdt_virt = nova_plugin.api.validators``). Nova validates flavor extra
specs on create and update from compute API microversion 2.86: an invalid
value gets HTTP 400 with the validator's message. Without a validator, Nova
would reject every ``hw:`` key it does not know.

The validators are generated from
:data:`rdt_virt.policy.extra_specs.EXTRA_SPECS` and parse values with the
same code the scheduler and the compute host use, so the API accepts exactly
what they accept.

Nova validates one key at a time, so combinations (``hw:mem_bw`` together
with ``hw:mem_bw_mbps``, ``hw:cache_l3_code`` without ``hw:cache_l3_data``)
cannot be refused here; ``RDTFilter`` refuses every host for such a flavor
and logs why.

Nova keeps one validator per name, the last one loaded, in an order that
depends on the entry points. If Nova, or another plugin, ever validates one
of rdt-virt's ``hw:`` keys itself, the two would silently replace each
other; :func:`register` refuses to load instead (:class:`ValidatorConflict`),
so nova-api fails at start with the names and the plugin to reconcile.
"""

import re

from nova.api.validation.extra_specs import base
from nova import exception as nova_exception
from stevedore import extension

from rdt_virt import exception
from rdt_virt.policy import extra_specs


class RDTExtraSpecValidator(base.ExtraSpecValidator):
    """An ``ExtraSpecValidator`` that parses with rdt-virt's own rules."""

    def __init__(self, spec):
        value = {'type': spec.type, 'description': spec.allowed}
        if spec.min is not None:
            value['min'] = spec.min
        if spec.max is not None:
            value['max'] = spec.max
        if spec.choices:
            # Nova's API reference lists an enumeration's words.
            value['enum'] = list(spec.choices)
        super().__init__(name=spec.key, description=spec.description,
                         value=value)
        self.spec = spec

    def validate(self, name, value):
        """Raise Nova's ValidationError (HTTP 400) for an invalid value."""
        # Checks the name the way Nova's base class does.
        if name != self.name:
            raise nova_exception.ValidationError(
                "Validation failed; expected extra spec '%s' but got '%s'."
                % (self.name, name))
        try:
            self.spec.parse(value)
        except exception.InvalidExtraSpec as e:
            raise nova_exception.ValidationError(
                "Validation failed; '%s' is not a valid value for %s: it "
                "must be %s." % (value, name, e.allowed))


NAMESPACE = 'nova.api.extra_spec_validators'


class ValidatorConflict(RuntimeError):
    """Another plugin of Nova's validators claims an rdt-virt key."""

    def __init__(self, clashes):
        self.clashes = clashes
        super().__init__(
            'rdt-virt refuses to load its flavor extra spec validators: %s. '
            'Nova keeps one validator per extra spec, so one would silently '
            'replace the other; use an rdt-virt release made for this Nova.'
            % '; '.join('%s is also validated by %s (as %s)' % c
                        for c in clashes))


def _other_plugins():
    """``{entry point name: module}`` of the other validator plugins."""
    manager = extension.ExtensionManager(NAMESPACE, invoke_on_load=False)
    return {ext.name: ext.plugin for ext in manager
            if ext.plugin.__name__ != __name__}


def clashes(ours, plugins):
    """Keys of ``ours`` that a validator of ``plugins`` also covers.

    :param ours: our validators.
    :param plugins: ``{name: module with register()}``.
    :returns: ``[(key, plugin name, its validator's name)]``.
    """
    found = []
    for plugin, module in sorted(plugins.items()):
        for other in module.register():
            for mine in ours:
                if (other.name == mine.name or
                        re.fullmatch(other.name_regex, mine.name)):
                    found.append((mine.name, plugin, other.name))
    return found


def register():
    """The validators of every RDT extra spec (called by nova-api).

    :raises: ValidatorConflict if another plugin validates one of them.
    """
    ours = [RDTExtraSpecValidator(spec) for spec in extra_specs.EXTRA_SPECS]
    found = clashes(ours, _other_plugins())
    if found:
        raise ValidatorConflict(found)
    return ours
