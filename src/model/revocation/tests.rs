use super::Reply::{Nothing, OptIn, OptOut, Review};
use super::*;

/// (body, OptOutType, what it says): the contract's examples first, then what people write.
const CASES: &[(&str, Option<&str>, Reply)] = &[
    // The contract's opt-outs.
    ("STOP", None, OptOut),
    ("Stop.", None, OptOut),
    ("STOP STOP", None, OptOut),
    ("stop please", None, OptOut),
    ("ＳＴＯＰ", None, OptOut),
    ("STOP 🛑", None, OptOut),
    ("Stop texting me", None, OptOut),
    ("UNSUBSCRIBE ME", None, OptOut),
    ("remove me", None, OptOut),
    ("take me off your list", None, OptOut),
    ("do not text me", None, OptOut),
    ("opt-out", None, OptOut),
    // The FCC's words, Twilio's keywords, as sent.
    ("stop", None, OptOut),
    ("quit", None, OptOut),
    ("end", None, OptOut),
    ("revoke", None, OptOut),
    ("opt out", None, OptOut),
    ("cancel", None, OptOut),
    ("unsubscribe", None, OptOut),
    ("STOPALL", None, OptOut),
    ("UNSUBSCRIBE", None, OptOut),
    ("CANCEL", None, OptOut),
    ("END", None, OptOut),
    ("QUIT", None, OptOut),
    ("REVOKE", None, OptOut),
    ("OPTOUT", None, OptOut),
    ("stop all", None, OptOut),
    ("Stop-all", None, OptOut),
    // Case, white space, hyphens, punctuation, quotes.
    ("sToP", None, OptOut),
    ("  Stop \r\n", None, OptOut),
    ("\u{3000}stop\u{a0}", None, OptOut),
    ("opt  out", None, OptOut),
    ("Opt\tOut", None, OptOut),
    ("Opt-Out!", None, OptOut),
    ("opt \u{2013} out", None, OptOut),
    ("opt_out", None, OptOut),
    ("stop.", None, OptOut),
    ("STOP!!!", None, OptOut),
    ("stop?!", None, OptOut),
    ("Stop\u{2026}", None, OptOut),
    ("stop !", None, OptOut),
    ("stop\u{ff01}", None, OptOut),
    ("\u{a1}Stop!", None, OptOut),
    ("\"STOP\"", None, OptOut),
    ("'stop'", None, OptOut),
    ("\u{201c}Stop\u{201d}", None, OptOut),
    ("\"STOP\".", None, OptOut),
    ("\u{ab}stop\u{bb}", None, OptOut),
    ("(stop)", None, OptOut),
    ("[STOP]", None, OptOut),
    ("*stop*", None, OptOut),
    ("stop :)", None, OptOut),
    ("STOP!!! 😡😡", None, OptOut),
    ("🛑🛑 STOP 🛑🛑", None, OptOut),
    ("Stop 🙏", None, OptOut),
    ("STOP STOP STOP", None, OptOut),
    ("stop stop", None, OptOut),
    ("Stop. Stop. Stop.", None, OptOut),
    // What does not show is skipped; full-width letters fold.
    ("\u{feff}stop", None, OptOut),
    ("st\u{200b}op", None, OptOut),
    ("stop\u{0}", None, OptOut),
    ("\u{1b}stop\u{7}", None, OptOut),
    ("ＳＴＯＰ　ＰＬＥＡＳＥ", None, OptOut),
    ("ｕｎｓｕｂｓｃｒｉｂｅ", None, OptOut),
    ("𝐒𝐓𝐎𝐏", None, OptOut),
    // Courtesy around it.
    ("please stop", None, OptOut),
    ("Stop please!", None, OptOut),
    ("STOP PLS", None, OptOut),
    ("stop, thank you", None, OptOut),
    ("Stop thanks", None, OptOut),
    ("please cancel", None, OptOut),
    ("Unsubscribe me please", None, OptOut),
    ("unsubscribe me now", None, OptOut),
    ("Hi, please unsubscribe me. Thank you!", None, OptOut),
    ("sorry, stop", None, OptOut),
    ("ok stop", None, OptOut),
    ("STOP NOW", None, OptOut),
    ("stop asap", None, OptOut),
    ("stop texting", None, OptOut),
    ("STOP TEXTING ME!!!", None, OptOut),
    ("Please stop texting me", None, OptOut),
    ("stop messaging me", None, OptOut),
    ("stop sending me texts", None, OptOut),
    ("stop sending messages", None, OptOut),
    ("Stop contacting me", None, OptOut),
    ("Remove me from your list", None, OptOut),
    ("remove me from this list please", None, OptOut),
    ("Please remove me", None, OptOut),
    ("take me off", None, OptOut),
    ("Take me off the list", None, OptOut),
    ("take me off of your list", None, OptOut),
    ("Do not text me", None, OptOut),
    ("don't text me", None, OptOut),
    ("Don\u{2019}t text me!", None, OptOut),
    ("dont text", None, OptOut),
    ("do not contact me", None, OptOut),
    ("Do not message me again", None, Review),
    ("no more texts", None, OptOut),
    ("No more messages please", None, OptOut),
    ("opt me out", None, OptOut),
    ("OPT-OUT NOW", None, OptOut),
    ("cancel please", None, OptOut),
    ("END.", None, OptOut),
    ("quit texting me", None, Review),
    ("stop this", None, OptOut),
    ("stop the texts", None, OptOut),
    ("unsubscribe from this list", None, OptOut),
    ("Revoke.", None, OptOut),
    // Spanish.
    ("ALTO", None, OptOut),
    ("alto", None, OptOut),
    ("PARAR", None, OptOut),
    ("Basta", None, OptOut),
    ("basta ya", None, OptOut),
    ("cancelar", None, OptOut),
    ("CANCELAR por favor", None, OptOut),
    ("baja", None, OptOut),
    ("Baja, gracias", None, OptOut),
    ("no más mensajes", None, OptOut),
    ("darme de baja", None, OptOut),
    ("dar de baja", None, OptOut),
    ("¡Alto!", None, OptOut),
    ("¿Parar?", None, OptOut),
    ("para", None, Nothing),
    ("para mi mamá", None, Nothing),
    ("gracias", None, Nothing),
    ("número equivocado", None, Review),
    ("no me interesa", None, Review),
    ("alto ahí, ¿quién es?", None, Review),
    // The contract's reviews, and sentences that merely hold a word.
    ("I want to opt out of this", None, Review),
    ("please end these messages", None, Review),
    ("cancel my order", None, Review),
    ("stop by at 5?", None, Review),
    ("wrong number", None, Review),
    ("Wrong number!", None, Review),
    ("stop by the office", None, Review),
    ("please don't stop", None, Review),
    ("end of day", None, Review),
    ("I'll stop by tomorrow", None, Review),
    ("Can you stop texting my husband", None, Review),
    ("stop texting me about the rally", None, Review),
    ("please stop texting me about the rally", None, Review),
    ("I'm not interested", None, Review),
    ("not interested", None, Review),
    ("leave me alone", None, Review),
    ("how do I unsubscribe?", None, Review),
    ("did you cancel the event?", None, Review),
    ("the rally will end at 9", None, Review),
    ("stop2", None, Review),
    ("stop 2", None, Review),
    ("STOP and START", None, Review),
    ("stop start", None, Review),
    ("optout out", None, Review),
    (
        "unsubscribe me from everything you sent my dad",
        None,
        Review,
    ),
    ("I already said stop", None, Review),
    ("STOP I said STOP", None, Review),
    ("quit it", None, Review),
    ("end these", None, Review),
    ("yes please stop", None, Review),
    // Neither.
    ("Stopp", None, Nothing),
    ("stops", None, Nothing),
    ("stopped", None, Nothing),
    ("sto p", None, Nothing),
    ("s.t.o.p", None, Nothing),
    ("opt", None, Nothing),
    ("out", None, Nothing),
    ("arrêt", None, Nothing),
    ("unsubscribed", None, Nothing),
    ("\u{202e}pots", None, Nothing),
    ("ending", None, Nothing),
    ("cancellation", None, Nothing),
    ("Thanks!", None, Nothing),
    ("who is this?", None, Nothing),
    ("I'll be there", None, Nothing),
    ("count me in", None, Nothing),
    ("What time is the rally?", None, Nothing),
    ("🛑", None, Nothing),
    ("😡😡😡", None, Nothing),
    ("please", None, Nothing),
    ("me", None, Nothing),
    ("", None, Nothing),
    ("   ", None, Nothing),
    ("?!.", None, Nothing),
    ("\"\"", None, Nothing),
    ("-", None, Nothing),
    // Opt-in and its near misses.
    ("start", None, OptIn),
    ("START", None, OptIn),
    ("Unstop!", None, OptIn),
    ("start please", None, OptIn),
    ("ＳＴＡＲＴ", None, OptIn),
    ("yes", None, Nothing),
    ("YES", None, Nothing),
    ("help", None, Nothing),
    ("INFO", None, Nothing),
    ("start over", None, Nothing),
    ("starting", None, Nothing),
    // Twilio's OptOutType: STOP, START, HELP.
    ("ALTO", Some("STOP"), OptOut),
    ("please stop texting me", Some("STOP"), OptOut),
    ("whatever it says", Some("STOP"), OptOut),
    ("yes", Some("START"), OptIn),
    ("help", Some("HELP"), Nothing),
    ("stop", Some("HELP"), OptOut),
    ("stop", Some("START"), OptOut),
    ("stop by at 5?", Some("START"), Review),
    ("start", Some("STOP"), OptOut),
    ("", Some("stop"), OptOut),
    ("", Some(" STOP "), OptOut),
    ("", Some("START"), OptIn),
    ("", Some("HELP"), Nothing),
    ("", Some("STOPALL"), Nothing),
    ("", Some(""), Nothing),
    ("hello", Some("other"), Nothing),
];

#[test]
fn each_reply_says_what_the_table_says() {
    assert!(CASES.len() >= 150, "{} cases", CASES.len());
    let wrong: Vec<String> = CASES
        .iter()
        .filter(|(body, kind, said)| classify(body, *kind) != *said)
        .map(|(body, kind, said)| {
            let got = classify(body, *kind);
            format!("{body:?} with {kind:?}: {got:?}, not {said:?}")
        })
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn a_reading_names_the_revocation_words_it_holds_once_each() {
    let reading = read("STOP texting me, stop by at 5? wrong number", None, &[]);
    assert_eq!(reading.reply, Review);
    assert_eq!(reading.matched, ["stop texting", "stop", "wrong number"]);
    assert!(read("count me in", None, &[]).matched.is_empty());
    assert_eq!(read("Stop. STOP!", None, &[]).matched, ["stop"]);
}

#[test]
fn a_sources_own_words_revoke_as_the_others_do() {
    let own = vec!["halt".to_owned(), "No Mas".to_owned(), "  ".to_owned()];
    assert_eq!(read("HALT", None, &own).reply, OptOut);
    assert_eq!(read("halt please", None, &own).reply, OptOut);
    assert_eq!(read("no más", None, &own).reply, OptOut);
    assert_eq!(read("halt the car", None, &own).reply, Review);
    assert_eq!(read("halt", None, &[]).reply, Nothing);
    assert_eq!(read("", None, &own).reply, Nothing);
}

#[test]
fn a_long_reply_is_read_in_one_pass_and_a_bare_word_however_long_its_tail() {
    let sentence = "stop ".repeat(200_000);
    assert_eq!(
        classify(&sentence, None),
        Review,
        "too long to be a bare stop"
    );
    let shouting = format!("STOP{}", "!".repeat(1_000_000));
    assert_eq!(classify(&shouting, None), OptOut);
    let hidden = format!("stop{}", "\u{200b}".repeat(1_000_000));
    assert_eq!(classify(&hidden, None), OptOut);
    let letters = "a".repeat(1_000_000);
    assert_eq!(classify(&letters, None), Nothing);
    let long_word = format!("stop{}", "p".repeat(100));
    assert_eq!(classify(&long_word, None), Nothing);
    assert_eq!(classify(&"please ".repeat(MOST_WORDS - 1), None), Nothing);
    let almost = format!("{}stop", "please ".repeat(MOST_WORDS - 1));
    assert_eq!(classify(&almost, None), OptOut);
    let over = format!("{}stop", "please ".repeat(MOST_WORDS));
    assert_eq!(
        classify(&over, None),
        Nothing,
        "the stop past the words read"
    );
}

#[test]
fn every_listed_word_is_written_as_a_reply_is_folded() {
    let phrases = REVOKING_PHRASES.iter().chain(REVIEW_PHRASES.iter());
    let all = REVOKING
        .iter()
        .chain(COURTESY.iter())
        .chain(OPT_IN.iter())
        .copied()
        .chain(phrases.flat_map(|p| p.iter().copied()));
    for word in all {
        assert_eq!(words(word).0, [word], "{word}");
        assert!(word.len() <= LONGEST_WORD, "{word}");
    }
}
