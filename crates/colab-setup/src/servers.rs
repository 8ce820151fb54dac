//! Exact server resolution: a name selects only the one live row that carries it.
//!
//! The same rule serves every route: rows of the Colab server picker (their labels are the
//! aliases), sessions of google-colab-cli's sessions file (keyed by session name) and runtimes a
//! standalone host assigned itself. There is no trimming, case folding, prefix or "closest"
//! match, and no fallback: anything but exactly one available row with exactly that name is an
//! error, and nothing is created.

use crate::error::SetupError;

/// Whether a listed server can be used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Availability {
    /// Live and selectable.
    Available,
    /// Listed but not usable (a disabled picker row, a session that is not running).
    Disabled,
    /// Usable once the user refreshes credentials (an expired proxy token the host could not
    /// refresh).
    CredentialsExpired,
}

/// One server as a host lists it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ServerRow {
    /// The name the row carries: the alias label in the picker, the session name in the sessions
    /// file. Reported exactly as observed.
    pub name: String,
    /// Whether it can be used.
    pub availability: Availability,
    /// The runtime's endpoint, when the host knows it (opaque to this crate).
    pub endpoint: Option<String>,
}

impl ServerRow {
    /// An available row without an endpoint.
    pub fn available(name: impl Into<String>) -> Self {
        ServerRow {
            name: name.into(),
            availability: Availability::Available,
            endpoint: None,
        }
    }
}

/// The position of the one row named exactly `name`, if it is available.
///
/// Errors: no such row → `alias_unknown`; several → `alias_ambiguous`; one that is disabled →
/// `alias_disabled`. A row whose credentials expired is returned: the caller decides whether to
/// wait for a refresh.
pub fn resolve_server(name: &str, rows: &[ServerRow]) -> Result<usize, SetupError> {
    let mut matches = rows.iter().enumerate().filter(|(_, row)| row.name == name);
    let Some((position, row)) = matches.next() else {
        return Err(SetupError::AliasUnknown {
            name: name.to_owned(),
        });
    };
    let others = matches.count();
    if others > 0 {
        return Err(SetupError::AliasAmbiguous {
            name: name.to_owned(),
            count: others + 1,
        });
    }
    match row.availability {
        Availability::Disabled => Err(SetupError::AliasDisabled {
            name: name.to_owned(),
        }),
        Availability::Available | Availability::CredentialsExpired => Ok(position),
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn row(name: &str, availability: Availability) -> ServerRow {
        ServerRow {
            availability,
            ..ServerRow::available(name)
        }
    }

    #[test]
    fn only_an_exact_single_available_row_resolves() {
        let rows = [
            row("Colab CPU", Availability::Available),
            row("m0123abcd", Availability::Available),
            row("m0123abce", Availability::Disabled),
            row("m00000000", Availability::Available),
            row("m00000000", Availability::Available),
        ];
        assert_eq!(resolve_server("m0123abcd", &rows), Ok(1));
        assert_eq!(
            resolve_server("m00000000", &rows),
            Err(SetupError::AliasAmbiguous {
                name: "m00000000".into(),
                count: 2
            })
        );
        for (name, rows, code) in [
            ("m0123abc", &rows[..], "alias_unknown"),
            ("M0123ABCD", &rows[..], "alias_unknown"),
            (" m0123abcd", &rows[..], "alias_unknown"),
            ("m0123abce", &rows[..], "alias_disabled"),
            ("m0123abcd", &[], "alias_unknown"),
        ] {
            let error = resolve_server(name, rows).unwrap_err();
            assert_eq!(error.code(), code, "{name:?} in {} rows", rows.len());
        }
    }

    fn name() -> impl Strategy<Value = String> {
        // A small alphabet, so that near-misses (case, prefix, padding) are common.
        let near_misses = vec![
            "m0123abcd",
            "m0123abce",
            "M0123ABCD",
            "m0123abcd ",
            "m0123abc",
            "Colab CPU",
        ];
        prop_oneof![
            6 => prop::sample::select(near_misses).prop_map(str::to_owned),
            1 => "[mM0-9a-f ]{0,10}",
        ]
    }

    fn availability() -> impl Strategy<Value = Availability> {
        prop_oneof![
            4 => Just(Availability::Available),
            1 => Just(Availability::Disabled),
            1 => Just(Availability::CredentialsExpired),
        ]
    }

    proptest! {
        /// A name never resolves to a row it did not name: whatever the rows, a resolved position
        /// holds exactly that name, no other row holds it, and the row is not disabled. And when
        /// exactly one usable row carries the name, it is found.
        #[test]
        fn a_name_never_resolves_to_a_server_it_did_not_name(
            wanted in name(),
            rows in proptest::collection::vec((name(), availability()), 0..8),
        ) {
            let rows: Vec<ServerRow> = rows
                .into_iter()
                .map(|(name, availability)| row(&name, availability))
                .collect();
            let named: Vec<usize> = rows
                .iter()
                .enumerate()
                .filter(|(_, row)| row.name == wanted)
                .map(|(position, _)| position)
                .collect();
            match resolve_server(&wanted, &rows) {
                Ok(position) => {
                    prop_assert_eq!(&rows[position].name, &wanted);
                    prop_assert_eq!(named, vec![position]);
                    prop_assert_ne!(rows[position].availability, Availability::Disabled);
                }
                Err(error) => {
                    let expected = match named.as_slice() {
                        [] => "alias_unknown",
                        [only] => {
                            prop_assert_eq!(rows[*only].availability, Availability::Disabled);
                            "alias_disabled"
                        }
                        _ => "alias_ambiguous",
                    };
                    prop_assert_eq!(error.code(), expected);
                }
            }
        }
    }
}
