//! NetworkPolicies: upstream's defaults (`SetDefaults_NetworkPolicy`): ports are TCP unless
//! they say otherwise, and the policy types follow from the rules present.

use apiserver::registry::Strategy;
use serde_json::{Value, json};

pub struct NetworkPolicyStrategy;

impl Strategy for NetworkPolicyStrategy {
    fn default(&self, obj: &mut Value) {
        let Some(spec) = obj.get_mut("spec").filter(|s| s.is_object()) else {
            return;
        };
        for direction in ["ingress", "egress"] {
            for rule in spec
                .get_mut(direction)
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
            {
                for port in rule
                    .get_mut("ports")
                    .and_then(Value::as_array_mut)
                    .into_iter()
                    .flatten()
                    .filter(|p| p.is_object())
                {
                    if port.get("protocol").is_none_or(Value::is_null) {
                        port["protocol"] = json!("TCP");
                    }
                }
            }
        }
        // Ingress always (a policy isolates ingress unless it says otherwise), Egress when it
        // has egress rules.
        if spec
            .get("policyTypes")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty)
        {
            let mut types = vec![json!("Ingress")];
            if spec
                .get("egress")
                .and_then(Value::as_array)
                .is_some_and(|rules| !rules.is_empty())
            {
                types.push(json!("Egress"));
            }
            spec["policyTypes"] = Value::Array(types);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_tcp_and_policy_types_follow_the_rules() {
        let mut np = json!({"spec": {"podSelector": {}, "ingress": [{"ports": [{"port": 80}, {"port": 53, "protocol": "UDP"}]}]}});
        NetworkPolicyStrategy.default(&mut np);
        assert_eq!(
            np["spec"],
            json!({"podSelector": {}, "ingress": [{"ports": [{"port": 80, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}]}], "policyTypes": ["Ingress"]})
        );
        let mut both = json!({"spec": {"podSelector": {}, "egress": [{}]}});
        NetworkPolicyStrategy.default(&mut both);
        assert_eq!(both["spec"]["policyTypes"], json!(["Ingress", "Egress"]));
    }
}
