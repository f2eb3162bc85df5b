//! Calls of a file's own services when the file is placed over several engines.
//!
//! `call name=NAME` without `url=` and `pipeline=` calls the service of its own pipeline:
//! `host-in name=NAME whole=true` and `host-out name=NAME whole=true` (see
//! [`crate::calls`]). Placed, a call may sit on another engine than its service. Then
//! the call's part names the service's part (submitted first, as a part is after the parts it
//! sends to), and its line gains `url=`, `pipeline=` and `engine=` of that part. The part
//! that serves calls from other parts is stopped once they have all finished, as a service
//! runs until stopped; so it may hold no other sources, which that stop would cut short.

use std::collections::HashMap;

use super::error::PlacementError;
use offhost_engine::lang::{Spec, TaskLine};
use offhost_engine::Registry;

/// The value of argument `key` of task `t`, written as `key=VALUE` or in its place among the
/// positional arguments (the order in which the task declares its arguments).
pub(crate) fn arg_of<'a>(t: &'a TaskLine, key: &str, registry: &Registry) -> Option<&'a str> {
    let declared = registry.get(&t.command).map(|(info, _)| &info.args);
    let mut positional = declared.into_iter().flatten();
    for a in &t.args {
        let name = match &a.key {
            Some(k) => Some(k.as_str()),
            None => positional.next().map(|d| d.name.as_str()),
        };
        if name == Some(key) {
            return Some(&a.value);
        }
    }
    None
}

/// Whether task `t` calls its own pipeline's service (a `call` without `url=` and
/// `pipeline=`), and then the service's name.
fn own_service_call<'a>(t: &'a TaskLine, registry: &Registry) -> Option<&'a str> {
    let given = |k| arg_of(t, k, registry).is_some_and(|v| !v.is_empty());
    (t.command == "call" && !given("url") && !given("pipeline"))
        .then(|| arg_of(t, "name", registry))
        .flatten()
}

/// The calls of a file's own services, and where each service's host ports are.
#[derive(Debug, Clone, Default)]
pub(crate) struct ServiceCalls {
    /// Each call of an own service: the task and the service's name.
    calls: Vec<(usize, String)>,
    /// Each service's `host-in` and `host-out` tasks.
    ports: HashMap<String, (Option<usize>, Option<usize>)>,
}

impl ServiceCalls {
    /// The own-service calls of `spec` and the host ports they name.
    pub(crate) fn find(spec: &Spec, registry: &Registry) -> ServiceCalls {
        let mut calls = Vec::new();
        for (i, t) in spec.tasks.iter().enumerate() {
            if let Some(n) = own_service_call(t, registry) {
                calls.push((i, n.to_string()));
            }
        }
        let mut ports: HashMap<String, (Option<usize>, Option<usize>)> = HashMap::new();
        for (i, t) in spec.tasks.iter().enumerate() {
            let Some(n) = arg_of(t, "name", registry) else {
                continue;
            };
            if !calls.iter().any(|(_, c)| c == n) {
                continue;
            }
            let e = ports.entry(n.to_string()).or_default();
            match t.command.as_str() {
                "host-in" => e.0 = Some(i),
                "host-out" => e.1 = Some(i),
                _ => {}
            }
        }
        ServiceCalls { calls, ports }
    }

    /// The calls whose service sits in another part: `(call task, the service's part, the
    /// service's name)`, with `part_of` giving each task's part. A service whose two host
    /// ports sit in two parts cannot serve, and one called both from its own part and from
    /// others cannot either (its engine hands the ports to the calls beside them at start);
    /// the errors name the lines. (A service without its ports is left to the engine, whose
    /// build error names the call's line.)
    pub(crate) fn across(
        &self,
        spec: &Spec,
        part_of: &[String],
    ) -> Result<Vec<(usize, String, String)>, PlacementError> {
        let mut v = Vec::new();
        for (call, name) in &self.calls {
            let Some(&(Some(i), Some(o))) = self.ports.get(name) else {
                continue;
            };
            if part_of[i] != part_of[o] {
                return Err(PlacementError::SplitService {
                    name: name.clone(),
                    host_in: spec.tasks[i].line,
                    host_out: spec.tasks[o].line,
                });
            }
            if part_of[*call] != part_of[i] {
                v.push((*call, part_of[i].clone(), name.clone()));
            }
        }
        for (call, name) in &self.calls {
            let beside = self.ports.get(name).and_then(|p| p.0).map(|i| &part_of[i]);
            let from_afar = v.iter().find(|(_, _, n)| n == name);
            if let (Some(part), Some((far, _, _))) = (beside, from_afar) {
                if part_of[*call] == *part {
                    return Err(PlacementError::ServiceCalledBesideAndFromAfar {
                        name: name.clone(),
                        beside: spec.tasks[*call].line,
                        afar: spec.tasks[*far].line,
                    });
                }
            }
        }
        Ok(v)
    }

    /// Checks that a part serving calls from other parts (`serving`) holds no source but its
    /// services' `host-in`s: stopping it once its callers are done would cut others short.
    pub(crate) fn check_serving(
        &self,
        spec: &Spec,
        part_of: &[String],
        serving: &[String],
    ) -> Result<(), PlacementError> {
        for (i, t) in spec.tasks.iter().enumerate() {
            if !t.inputs.is_empty() || !serving.contains(&part_of[i]) {
                continue;
            }
            let served = self.ports.values().any(|&(host_in, _)| host_in == Some(i));
            if !served {
                return Err(PlacementError::SourceBesideService {
                    part: part_of[i].clone(),
                    task: t.command.clone(),
                    line: t.line,
                });
            }
        }
        Ok(())
    }
}
