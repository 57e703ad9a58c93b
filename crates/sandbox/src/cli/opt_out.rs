//! `sandbox mobilize-opt-out` and `sandbox mobile-commons-stop`: a person opts out on a
//! system the daemon reads back (a supporter on Mobilize, a STOP texted to a Mobile Commons
//! campaign), played on a running sandbox through its controls.

use serde_json::json;

/// Flags of `sandbox mobilize-opt-out` and `sandbox mobile-commons-stop`.
#[derive(Debug, Clone, clap::Args)]
pub struct OptOutThere {
    /// The running sandbox (`http://127.0.0.1:9090`).
    #[arg(long, value_name = "SANDBOX_URL")]
    pub url: String,
    /// A number in E.164 (a person or profile is made there when nobody has it).
    #[arg(long, value_name = "P")]
    pub phone: String,
}

impl OptOutThere {
    /// Posts the opt-out to the control `path` (`/mobilize/opt-out`,
    /// `/mobile_commons/stop`); prints the person or profile as the fake now serves it, or
    /// fails on an answer other than 2xx.
    pub(super) async fn run(self, path: &str) -> anyhow::Result<()> {
        super::control(&self.url, path, json!({ "phoneNumber": self.phone })).await
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::super::{SandboxArgs, SandboxCommand};

    #[derive(clap::Parser)]
    struct Line {
        #[command(flatten)]
        args: SandboxArgs,
    }

    #[test]
    fn each_opt_out_there_needs_a_sandbox_and_a_phone() {
        for command in ["mobilize-opt-out", "mobile-commons-stop"] {
            let line = Line::try_parse_from([
                "sandbox",
                command,
                "--url",
                "http://127.0.0.1:9090",
                "--phone",
                "+14155550100",
            ])
            .expect("parses");
            let opt_out = match line.args.command {
                Some(SandboxCommand::MobilizeOptOut(o) | SandboxCommand::MobileCommonsStop(o)) => o,
                _ => panic!("not {command}"),
            };
            assert_eq!(opt_out.url, "http://127.0.0.1:9090");
            assert_eq!(opt_out.phone, "+14155550100");
            for wrong in [
                vec!["sandbox", command, "--url", "u"],
                vec!["sandbox", command, "--phone", "+1"],
            ] {
                assert!(Line::try_parse_from(&wrong).is_err(), "{wrong:?}");
            }
        }
    }
}
