//! `sandbox mobilize-opt-out`: a supporter opts out of a campaign's texts on Mobilize, played
//! on a running sandbox through its controls.

use serde_json::json;

/// Flags of `sandbox mobilize-opt-out`.
#[derive(Debug, Clone, clap::Args)]
pub struct MobilizeOptOut {
    /// The running sandbox (`http://127.0.0.1:9090`).
    #[arg(long, value_name = "SANDBOX_URL")]
    pub url: String,
    /// A number in E.164 (a person is made in Mobilize when nobody has it).
    #[arg(long, value_name = "P")]
    pub phone: String,
}

impl MobilizeOptOut {
    /// Posts the opt-out to `/_control/mobilize/opt-out`; prints the person as Mobilize now
    /// serves it, or fails on an answer other than 2xx.
    pub(super) async fn run(self) -> anyhow::Result<()> {
        super::control(
            &self.url,
            "/mobilize/opt-out",
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
    fn mobilize_opt_out_needs_a_sandbox_and_a_phone() {
        let line = Line::try_parse_from([
            "sandbox",
            "mobilize-opt-out",
            "--url",
            "http://127.0.0.1:9090",
            "--phone",
            "+14155550100",
        ])
        .expect("parses");
        let Some(SandboxCommand::MobilizeOptOut(opt_out)) = line.args.command else {
            panic!("not mobilize-opt-out");
        };
        assert_eq!(opt_out.url, "http://127.0.0.1:9090");
        assert_eq!(opt_out.phone, "+14155550100");
        for wrong in [
            vec!["sandbox", "mobilize-opt-out", "--url", "u"],
            vec!["sandbox", "mobilize-opt-out", "--phone", "+1"],
        ] {
            assert!(Line::try_parse_from(&wrong).is_err(), "{wrong:?}");
        }
    }
}
