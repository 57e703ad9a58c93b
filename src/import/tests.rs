//! The list reader's tests: formats, line numbers, bounded quoting.

use sha2::Sha256;

use super::*;

fn read(text: &[u8], options: &ListOptions) -> (Vec<Row>, Summary) {
    let mut reader = ListReader::new(text, options).expect("a list");
    let rows: Vec<Row> = reader.by_ref().map(|r| r.expect("a row")).collect();
    (rows, reader.finish().expect("a summary"))
}

/// The distinct numbers of `rows`, each with its first line, and how many rows
/// repeated one.
fn distinct(rows: &[Row]) -> (Vec<(u64, String)>, u64) {
    let mut numbers = Numbers::default();
    for row in rows {
        if let Row::Number { line, number } = row {
            numbers.push(number, *line);
        }
    }
    let (kept, repeats) = numbers.finish();
    let kept = kept
        .into_iter()
        .map(|(digits, line)| (line, format!("+{digits}")))
        .collect();
    (kept, repeats)
}

fn numbers(rows: &[Row]) -> Vec<(u64, String)> {
    distinct(rows).0
}

#[test]
fn an_export_with_a_bom_a_header_semicolons_and_mixed_formats_is_read_line_by_line() {
    let text = "\u{feff}Name;Mobile Number;Notes\n\
                Ann;(202) 555-0143;x\n\
                \"Bo; Jr\";202.555.0144;\"two\nlines\"\n\
                Cy;+1 202 555 0145;\n\
                Di;555-0143;\n\
                Ed;202-555-0143;again\n";
    let (rows, summary) = read(text.as_bytes(), &ListOptions::default());
    assert_eq!(
        numbers(&rows),
        [
            (2, "+12025550143".to_owned()),
            (3, "+12025550144".to_owned()),
            (5, "+12025550145".to_owned())
        ]
    );
    let invalid: Vec<_> = rows
        .iter()
        .filter_map(|r| match r {
            Row::Invalid(i) => Some(i.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(invalid.len(), 1);
    assert_eq!(
        (invalid[0].line, invalid[0].value.as_str()),
        (6, "555-0143")
    );
    assert!(
        invalid[0].reason.contains("area code"),
        "{}",
        invalid[0].reason
    );
    assert_eq!((summary.rows, summary.valid, summary.invalid), (5, 4, 1));
    assert_eq!(distinct(&rows).1, 1, "one row repeats a number");
    assert_eq!(summary.sha256, hex::encode(Sha256::digest(text.as_bytes())));
}

#[test]
fn a_list_without_a_header_is_read_from_its_first_line() {
    let (rows, summary) = read(b"+15550100001\n+44 20 7946 0958\n", &ListOptions::default());
    assert_eq!(
        numbers(&rows),
        [
            (1, "+15550100001".to_owned()),
            (2, "+442079460958".to_owned())
        ]
    );
    assert_eq!(summary.rows, 2);
    let (rows, _) = read(
        b"id\tnumber\n7\t020 7946 0958\n",
        &ListOptions {
            region: "GB".parse().unwrap(),
            ..ListOptions::default()
        },
    );
    assert_eq!(numbers(&rows), [(2, "+442079460958".to_owned())]);
}

#[test]
fn a_named_column_is_found_and_a_missing_one_is_a_clear_error() {
    let options = ListOptions {
        phone_column: Some("Contact".into()),
        ..ListOptions::default()
    };
    let (rows, _) = read(b"phone,contact\n+15550100001,+15550100002\n", &options);
    assert_eq!(numbers(&rows), [(2, "+15550100002".to_owned())]);
    let Err(error) = ListReader::new(&b"phone,email\n+15550100001,a@b\n"[..], &options) else {
        panic!("a missing column is an error");
    };
    assert!(error.to_string().contains("\"Contact\""), "{error}");
    assert!(error.to_string().contains("\"email\""), "{error}");
    let Err(error) = ListReader::new(&b"name,email\nAnn,a@b\n"[..], &ListOptions::default()) else {
        panic!("no phone column is an error");
    };
    assert!(error.to_string().contains("--phone-column"), "{error}");
}

#[test]
fn lines_ending_in_cr_alone_lf_or_crlf_are_each_counted() {
    for end in ["\n", "\r\n", "\r"] {
        let text = [
            "phone",
            "+15550100001",
            "+15550100002",
            "",
            "+15550100003",
            "",
        ]
        .join(end);
        let (rows, summary) = read(text.as_bytes(), &ListOptions::default());
        assert_eq!(
            numbers(&rows),
            [
                (2, "+15550100001".to_owned()),
                (3, "+15550100002".to_owned()),
                (5, "+15550100003".to_owned())
            ],
            "lines ending in {end:?}"
        );
        assert_eq!(summary.sha256, hex::encode(Sha256::digest(text.as_bytes())));
    }
    let mixed = "phone\r+15550100001\n+15550100002\r\n\"+1 555\r010 0003\"\r+15550100004";
    let (rows, _) = read(mixed.as_bytes(), &ListOptions::default());
    let lines: Vec<u64> = rows
        .iter()
        .map(|r| match r {
            Row::Invalid(i) => i.line,
            Row::Number { line, .. } => *line,
        })
        .collect();
    assert_eq!(lines, [2, 3, 4, 6], "a line end inside quotes counts too");
}

#[test]
fn an_error_quotes_a_few_columns_of_a_huge_header_row_with_control_characters_escaped() {
    let header: Vec<String> = (0..100_000).map(|i| format!("col\u{1b}[31m{i}")).collect();
    let text = format!("{}\nAnn,a@b\n", header.join(","));
    let Err(error) = ListReader::new(text.as_bytes(), &ListOptions::default()) else {
        panic!("no phone column is an error");
    };
    let message = error.to_string();
    assert!(
        message.len() < 600,
        "{} bytes: {}",
        message.len(),
        &message[..600]
    );
    assert!(!message.chars().any(char::is_control), "{message}");
    assert!(message.contains(r#""col\u{1b}[31m0""#), "{message}");
    assert!(message.contains("99990 more"), "{message}");

    let wanted = "x".repeat(100_000);
    let options = ListOptions {
        phone_column: Some(wanted),
        ..ListOptions::default()
    };
    let Err(error) = ListReader::new(text.as_bytes(), &options) else {
        panic!("a missing column is an error");
    };
    let message = error.to_string();
    assert!(message.len() < 800, "{} bytes", message.len());
    assert!(!message.chars().any(char::is_control), "{message}");
}

proptest::proptest! {
    #[test]
    fn each_number_is_on_the_line_it_was_written_whatever_the_line_ends(
        ends in proptest::collection::vec(0usize..5, 1..40),
        last_ended in proptest::prelude::any::<bool>(),
    ) {
        // LF, CR, CRLF, and a blank line after each of two of them.
        const ENDS: [&str; 5] = ["\n", "\r", "\r\n", "\n\n", "\r\n\r\n"];
        let mut text = String::from("phone\n");
        let mut expected = Vec::new();
        let mut line = 2;
        for (i, &end) in ends.iter().enumerate() {
            text.push_str(&format!("+1555010{i:04}"));
            expected.push((line, format!("+1555010{i:04}")));
            if i + 1 < ends.len() || last_ended {
                text.push_str(ENDS[end]);
                line += if end >= 3 { 2 } else { 1 };
            }
        }
        let (rows, _) = read(text.as_bytes(), &ListOptions::default());
        proptest::prop_assert_eq!(numbers(&rows), expected);
    }

    #[test]
    fn any_bytes_are_read_as_rows_or_refused_with_a_reason(
        bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300),
    ) {
        match ListReader::new(&bytes[..], &ListOptions::default()) {
            Err(error) => proptest::prop_assert!(!error.to_string().is_empty()),
            Ok(mut reader) => {
                let mut rows = 0;
                for row in reader.by_ref() {
                    match row {
                        Ok(Row::Number { number, .. }) => {
                            proptest::prop_assert!(phone::is_e164_form(number.as_str()));
                        }
                        Ok(Row::Invalid(invalid)) => {
                            proptest::prop_assert!(!invalid.reason.is_empty());
                            proptest::prop_assert!(invalid.value.chars().count() <= SHOWN_VALUE_CHARS);
                        }
                        Err(error) => {
                            proptest::prop_assert!(!error.to_string().is_empty());
                            break;
                        }
                    }
                    rows += 1;
                }
                let summary = reader.finish();
                if let Ok(summary) = summary {
                    proptest::prop_assert!(summary.rows <= rows);
                    proptest::prop_assert_eq!(summary.sha256, hex::encode(Sha256::digest(&bytes)));
                }
            }
        }
    }
}
