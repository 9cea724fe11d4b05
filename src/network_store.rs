//! The napi methods that RedisStore and PostgresStore share, written once.
//!
//! Both are a napi class over an `Arc<Inner>` whose async methods of the same names and
//! signatures do the work on the Tokio runtime (`renew`, `settle`, `release`,
//! `expire_settled`, `clear`, `get`, `list`, `stats`); each JavaScript method only hands
//! that work to `guarded`
//! (panics and failures become the one error type). `network_store_methods!(Type)` writes
//! those methods, and the `with` helper they go through, for `Type`. What differs between
//! the stores (constructor, batches, prune, close, LISTEN) stays in each store's module.

macro_rules! network_store_methods {
    ($store:ident) => {
        impl $store {
            /// Runs `work` on the store's shared state, as a guarded future.
            fn with<T, F, Fut>(&self, work: F) -> impl std::future::Future<Output = napi::Result<T>>
            where
                T: Send + 'static,
                F: FnOnce(std::sync::Arc<Inner>) -> Fut,
                Fut: std::future::Future<Output = $crate::failure::StoreResult<T>> + Send + 'static,
            {
                $crate::failure::guarded(work(self.inner.clone()))
            }
        }

        #[napi_derive::napi]
        impl $store {
            #[napi]
            pub async fn renew(
                &self,
                key: String,
                token: String,
                lease_ms: f64,
            ) -> napi::Result<bool> {
                self.with(|s| async move { s.renew(key, token, lease_ms).await })
                    .await
            }

            #[napi]
            pub async fn complete(
                &self,
                request: $crate::record::SettleRequest,
            ) -> napi::Result<bool> {
                self.with(|s| async move { s.settle($crate::record::COMPLETED, request).await })
                    .await
            }

            #[napi]
            pub async fn fail(&self, request: $crate::record::SettleRequest) -> napi::Result<bool> {
                self.with(|s| async move { s.settle($crate::record::FAILED, request).await })
                    .await
            }

            /// Frees a stuck pending record; `reconcile` (default true) leaves it a claim
            /// nobody holds, for a takeover that asks `reconcile`, false makes it `failed`.
            #[napi]
            pub async fn release(
                &self,
                key: String,
                reconcile: Option<bool>,
            ) -> napi::Result<bool> {
                let reconcile = reconcile.unwrap_or(true);
                self.with(|s| async move { s.release(key, reconcile).await })
                    .await
            }

            /// Gives the settled records among `keys` the expiry `expiresAt` (epoch ms, the
            /// server's clock): a step's record expires with its completed call.
            #[napi]
            pub async fn expire_settled(
                &self,
                keys: Vec<String>,
                expires_at: f64,
            ) -> napi::Result<u32> {
                self.with(|s| async move { s.expire_settled(keys, expires_at).await })
                    .await
            }

            #[napi]
            pub async fn clear(&self, key: Option<String>) -> napi::Result<u32> {
                self.with(|s| async move { s.clear(key).await }).await
            }

            #[napi]
            pub async fn get(
                &self,
                key: String,
            ) -> napi::Result<Option<$crate::record::NativeRecord>> {
                self.with(|s| async move { s.get(key).await }).await
            }

            #[napi]
            pub async fn list_records(
                &self,
                status: Option<String>,
                limit: Option<u32>,
            ) -> napi::Result<Vec<$crate::record::NativeRecord>> {
                self.with(|s| async move { s.list(status, limit).await })
                    .await
            }

            #[napi]
            pub async fn stats(&self) -> napi::Result<$crate::record::NativeStats> {
                self.with(|s| async move { s.stats().await }).await
            }
        }
    };
}

pub(crate) use network_store_methods;
