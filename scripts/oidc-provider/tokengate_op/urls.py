from django.contrib.auth import views as auth_views
from django.urls import include, path
from oauth2_provider import urls as oauth2_urls

urlpatterns = [
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    # RFC 8414's document at the origin, as the toolkit's documentation says to mount it.
    path("", include((oauth2_urls.metadata_urlpatterns, "oauth2_metadata"))),
    path("o/", include(oauth2_urls)),
]
