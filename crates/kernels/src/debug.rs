//! `Debug` for types that show only some of their fields.

/// Implements `Debug` for a struct as its name and the fields named, then `..`: for types
/// whose other fields are handles, closures or secrets. This crate's handles use it, and so do
/// the hosts above it.
///
/// ```
/// struct Client {
///     url: String,
///     token: String,
/// }
/// kernels::debug_fields!(Client { url });
///
/// let client = Client { url: "https://x/".to_owned(), token: "secret".to_owned() };
/// assert_eq!(format!("{client:?}"), r#"Client { url: "https://x/", .. }"#);
/// # drop(client.token);
/// ```
#[macro_export]
macro_rules! debug_fields {
    ($type:ident { $($field:ident),+ $(,)? }) => {
        impl ::std::fmt::Debug for $type {
            fn fmt(&self, formatter: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                formatter
                    .debug_struct(::std::stringify!($type))
                    $(.field(::std::stringify!($field), &self.$field))+
                    .finish_non_exhaustive()
            }
        }
    };
}
