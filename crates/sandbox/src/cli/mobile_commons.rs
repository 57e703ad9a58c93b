//! `sandbox mobile-commons-stop`: a person texts STOP to a campaign on Mobile Commons, played
//! on a running sandbox through its controls.

use serde_json::json;

/// Flags of `sandbox mobile-commons-stop`.
#[derive(Debug, Clone, clap::Args)]
pub struct MobileCommonsStop {
    /// The running sandbox (`http://127.0.0.1:9090`).
    #[arg(long, value_name = "SANDBOX_URL")]
    pub url: String,
    /// A number in E.164 (a profile is made in Mobile Commons when nobody has it).
    #[arg(long, value_name = "P")]
    pub phone: String,
}

impl MobileCommonsStop {
    /// Posts the STOP to `/_control/mobile_commons/stop`; prints the profile as the truth
    /// holds it, or fails on an answer other than 2xx.
    pub(super) async fn run(self) -> anyhow::Result<()> {
        super::control(
            &self.url,
            "/mobile_commons/stop",
            json!({ "phoneNumber": self.phone }),
        )
        .await
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
    fn mobile_commons_stop_needs_a_sandbox_and_a_phone() {
        let line = Line::try_parse_from([
            "sandbox",
            "mobile-commons-stop",
            "--url",
            "http://127.0.0.1:9090",
            "--phone",
            "+14155550100",
        ])
        .expect("parses");
        let Some(SandboxCommand::MobileCommonsStop(stop)) = line.args.command else {
            panic!("not mobile-commons-stop");
        };
        assert_eq!(stop.url, "http://127.0.0.1:9090");
        assert_eq!(stop.phone, "+14155550100");
        for wrong in [
            vec!["sandbox", "mobile-commons-stop", "--url", "u"],
            vec!["sandbox", "mobile-commons-stop", "--phone", "+1"],
        ] {
            assert!(Line::try_parse_from(&wrong).is_err(), "{wrong:?}");
        }
    }
}
