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
"""

from nova.api.validation.extra_specs import base
from nova import exception as nova_exception

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


def register():
    """The validators of every RDT extra spec (called by nova-api)."""
    return [RDTExtraSpecValidator(spec) for spec in extra_specs.EXTRA_SPECS]
