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

# Nova 32 (2025.2) chooses oslo.service's backend when nova.api.openstack
# is imported, as its API services do before anything else of Nova: native
# threads when OS_NOVA_DISABLE_EVENTLET_PATCHING is set, as the unit
# tests run. A test module that imported nova.objects or the scheduler
# first (oslo.messaging's import asks oslo.service for its backend, which
# then takes its default, eventlet) made that choice fail
# (BackendAlreadySelected), and the whole suite with it. Import it first,
# as Nova's API does. Nova 33 chooses the backend in its entry points
# only; remove this with 2025.2.
import nova.api.openstack  # noqa: F401
