//! The columns of a row, as handlers and people read them.

use super::*;

#[test]
fn a_blob_of_json_text_is_shown_as_its_text_and_nothing_else_changes() {
    use base64::Engine as _;
    let b64 = |t: &str| base64::engine::general_purpose::STANDARD.encode(t);
    let names: Arc<[String]> = ["PAYLOAD", "NOTE", "RAW", "N", "TEXT"]
        .map(String::from)
        .into();
    let columns = Columns::new(
        names,
        vec![
            Value::String(b64(r#"{"order": 7, "lines": [1, 2]}"#)),
            Value::String("abcd".into()),
            Value::String(b64("\u{0}\u{1}binary")),
            Value::from(3),
            Value::String(b64(r#"{"a": 1}"#)),
        ],
    )
    .with_binary([true, true, true, false, false].into());
    let shown = columns.for_people();
    assert_eq!(shown["PAYLOAD"], r#"{"order": 7, "lines": [1, 2]}"#);
    assert_eq!(
        shown["NOTE"], "abcd",
        "base64-looking text that is no JSON stays"
    );
    assert_eq!(shown["RAW"], columns.get("RAW").unwrap().clone());
    assert_eq!(shown["N"], 3);
    assert_eq!(
        shown["TEXT"],
        columns.get("TEXT").unwrap().clone(),
        "a text column's base64 is what the table holds"
    );
}

/// A buffer of two rows of (ID, NAME, SCORE, NOTE): text, a float, NULL, a blob and
/// invalid UTF-8 among them.
fn two_rows() -> Arc<RowBuffer> {
    let names: Arc<[String]> = ["ID", "NAME", "SCORE", "NOTE"].map(String::from).into();
    let mut buffer = RowBuffer::new(names, 2);
    buffer.push_int(7);
    buffer.push_text("Zoë".as_bytes());
    buffer.push_real(2.5);
    buffer.push_null();
    buffer.push_int(8);
    buffer.push_text(b"bad \xff byte");
    buffer.push_real(f64::NAN);
    buffer.push_blob(&[0, 1, 2, 255]);
    Arc::new(buffer)
}

#[test]
fn buffered_columns_read_and_serialise_as_json_values_do() {
    let buffer = two_rows();
    let rows: Vec<Columns> = (0..2)
        .map(|i| Columns::buffered(Arc::clone(&buffer), i))
        .collect();
    let expected = [
        r#"{"ID":7,"NAME":"Zoë","SCORE":2.5,"NOTE":null}"#,
        r#"{"ID":8,"NAME":"bad � byte","SCORE":null,"NOTE":"AAEC/w=="}"#,
    ];
    for (columns, expected) in rows.iter().zip(expected) {
        // Straight from the buffer, before any value was asked for…
        assert_eq!(serde_json::to_string(columns).unwrap(), expected);
        // …and the same object once the JSON values exist.
        let map: Map<String, Value> = serde_json::from_str(expected).unwrap();
        assert_eq!(columns, &Columns::from(map.clone()));
        assert_eq!(serde_json::to_string(columns).unwrap(), expected);
        assert_eq!(columns.get("ID"), map.get("ID"));
        assert_eq!(columns.get_ignore_case("name"), map.get("NAME"));
    }
    assert_eq!(rows[1]["NOTE"], "AAEC/w==");
}

#[test]
fn a_buffered_record_reads_its_inserted_at_value_from_its_column() {
    let buffer = two_rows();
    let record = |row, column| {
        Record::in_buffer(
            Scalar::Int(7),
            "NEW".into(),
            column,
            None,
            Columns::buffered(Arc::clone(&buffer), row),
        )
    };
    assert_eq!(record(0, 1).inserted_at(), Scalar::Text("Zoë".into()));
    assert_eq!(record(1, 0).inserted_at(), Scalar::Int(8));
    assert_eq!(record(0, 2).inserted_at(), Scalar::Text("2.5".into()));
    let held = Record::new(
        Scalar::Int(1),
        "NEW".into(),
        Scalar::Int(1_700_000_000),
        None,
        Columns::new(Arc::from([]), Vec::new()),
    );
    assert_eq!(held.inserted_at(), Scalar::Int(1_700_000_000));
}
